"""HDR outputs: a folder of half-float OpenEXR frames and a 10-bit HEVC (BT.2020, HLG) master.

EXR frames are written with the OpenEXR project's own Python bindings (the `OpenEXR` wheel): the
format's reference implementation, a small self-contained wheel that reads and writes numpy arrays
(half floats included) with no system libraries - OpenImageIO would bring a far larger generic image
stack for one format. The master is encoded with PyAV's libx265 in yuv420p10le, limited range,
with BT.2020 primaries and matrix and the HLG (ARIB STD-B67) transfer tagged in the container and in
the HEVC stream. Both outputs are built under temporary names and renamed into place when complete.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import torch
import torch.nn.functional as F

from ltx_pipelines.io.atomic_files import OutputExistsError, atomic_output
from ltx_pipelines.io.errors import MediaError
from ltx_pipelines.io.hdr import linear_rec709_to_hlg_bt2020
from ltx_pipelines.io.video_writer import fps_fraction

logger = logging.getLogger(__name__)

EXR_FRAME_NAME = "frame_{:05d}.exr"
HEVC_PIXEL_FORMAT = "yuv420p10le"
DEFAULT_HEVC_CRF = 18
# FFmpeg AVCOL_* codes: BT.2020 primaries, ARIB STD-B67 (HLG) transfer, BT.2020 non-constant luminance
# matrix, limited (MPEG) range.
_AVCOL_PRI_BT2020 = 9
_AVCOL_TRC_ARIB_STD_B67 = 18
_AVCOL_SPC_BT2020_NCL = 9
_AVCOL_RANGE_MPEG = 1
_X265_PARAMS = "colorprim=bt2020:transfer=arib-std-b67:colormatrix=bt2020nc:range=limited:log-level=error"
_KR, _KB = 0.2627, 0.0593  # BT.2020 luma weights of red and blue
_KG = 1.0 - _KR - _KB
# Rec.709 chromaticities (red, green, blue, white xy) of the linear EXR frames.
_REC709_CHROMATICITIES = (0.64, 0.33, 0.30, 0.60, 0.15, 0.06, 0.3127, 0.3290)


def write_exr_frames(folder: str | Path, frames: Iterable[torch.Tensor], *, overwrite: bool = False) -> int:
    """Write (f, H, W, 3) scene-linear chunks as `frame_00000.exr`, ... (half float RGB, ZIP) into `folder`.

    The frames go to a hidden folder beside it that is renamed to `folder` once all are written; an
    existing `folder` is refused unless `overwrite` (it is then replaced whole). Returns the count.
    """
    import OpenEXR

    target = Path(folder).expanduser().absolute()
    if target.exists() and not overwrite:
        raise OutputExistsError(f"output folder {str(target)!r} already exists; pass --overwrite to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
    tmp.mkdir()
    count = 0
    try:
        for chunk in frames:
            for frame in chunk:
                pixels = np.ascontiguousarray(frame.detach().float().cpu().numpy().astype(np.float16))
                header = {
                    "compression": OpenEXR.ZIP_COMPRESSION,
                    "type": OpenEXR.scanlineimage,
                    "chromaticities": _REC709_CHROMATICITIES,
                }
                with OpenEXR.File(header, {"RGB": pixels}) as exr:
                    exr.write(str(tmp / EXR_FRAME_NAME.format(count)))
                count += 1
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("wrote %d EXR frames to %s", count, target)
    return count


def read_exr_frame(path: str | Path) -> np.ndarray:
    """One EXR frame as (H, W, 3) in its stored dtype (float16 for the frames written here)."""
    import OpenEXR

    try:
        with OpenEXR.File(str(path)) as exr:
            channels = exr.channels()
            if "RGB" in channels:
                return np.asarray(channels["RGB"].pixels)
            return np.stack([np.asarray(channels[c].pixels) for c in ("R", "G", "B")], axis=-1)
    except Exception as e:  # the bindings raise plain exceptions for unreadable files
        raise MediaError(f"{str(path)!r} is not an EXR file OpenEXR can read: {e}") from None


def hlg_to_yuv420p10(signal: torch.Tensor) -> torch.Tensor:
    """(F, H, W, 3) HLG BT.2020 R'G'B' in [0, 1] -> (F, H * 3 // 2, W) uint16 planar 4:2:0 10-bit
    limited-range codes (Y, then Cb, then Cr), BT.2020 non-constant-luminance matrix."""
    n, h, w, _ = signal.shape
    if h % 2 or w % 2:
        raise ValueError(f"4:2:0 needs an even frame size; got {w}x{h}")
    rgb = signal.to(torch.float32).clamp(0.0, 1.0).permute(0, 3, 1, 2)
    r, g, b = rgb.unbind(1)
    luma = _KR * r + _KG * g + _KB * b
    pr, pg, pb = F.avg_pool2d(rgb, kernel_size=2).unbind(1)
    pooled_luma = _KR * pr + _KG * pg + _KB * pb
    cb = (pb - pooled_luma) / (2.0 * (1.0 - _KB))
    cr = (pr - pooled_luma) / (2.0 * (1.0 - _KR))
    y = (luma * 876.0 + 64.0).round().clamp(0, 1023)
    u = (cb * 896.0 + 512.0).round().clamp(0, 1023)
    v = (cr * 896.0 + 512.0).round().clamp(0, 1023)
    planes = torch.cat([y.reshape(n, -1), u.reshape(n, -1), v.reshape(n, -1)], dim=1)
    return planes.reshape(n, h * 3 // 2, w).to(torch.int32)


def write_hevc_hlg_master(
    path: str | Path,
    frames: Iterable[torch.Tensor],
    *,
    fps: float | Fraction,
    crf: int = DEFAULT_HEVC_CRF,
    overwrite: bool = False,
) -> int:
    """Encode (f, H, W, 3) scene-linear Rec.709 chunks as a 10-bit HEVC HLG master (.mp4/.mov/.mkv).

    Odd sizes are cropped by one pixel to even (4:2:0). Returns the number of frames written.
    """
    count = 0
    with atomic_output(path, overwrite=overwrite) as tmp:
        suffix = Path(path).suffix.lower()
        container_format = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska"}.get(suffix, "mp4")
        with av.open(str(tmp), mode="w", format=container_format) as container:
            stream = None
            for chunk in frames:
                signal = linear_rec709_to_hlg_bt2020(chunk.detach().float().cpu())
                signal = signal[:, : signal.shape[1] // 2 * 2, : signal.shape[2] // 2 * 2]
                if stream is None:
                    stream = container.add_stream(
                        "libx265",
                        rate=fps_fraction(fps),
                        options={"crf": str(crf), "preset": "fast", "x265-params": _X265_PARAMS},
                    )
                    stream.height, stream.width = int(signal.shape[1]), int(signal.shape[2])
                    stream.pix_fmt = HEVC_PIXEL_FORMAT
                    cc = stream.codec_context
                    cc.color_primaries, cc.color_trc = _AVCOL_PRI_BT2020, _AVCOL_TRC_ARIB_STD_B67
                    cc.colorspace, cc.color_range = _AVCOL_SPC_BT2020_NCL, _AVCOL_RANGE_MPEG
                for plane in hlg_to_yuv420p10(signal).numpy().astype(np.uint16):
                    frame = av.VideoFrame.from_ndarray(plane, format=HEVC_PIXEL_FORMAT)
                    frame.colorspace, frame.color_range = _AVCOL_SPC_BT2020_NCL, _AVCOL_RANGE_MPEG
                    container.mux(stream.encode(frame))
                    count += 1
            if stream is None:
                raise MediaError("no frames to encode")
            container.mux(stream.encode(None))
    logger.info("wrote the 10-bit HLG master %s (%d frames)", path, count)
    return count
