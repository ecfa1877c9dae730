"""Image conditioning input: decode, re-compress through H.264 once, fit to the target size, normalise.

The model was trained on frames of compressed videos, so a pristine still is first passed once
through libx264 at the CRF of the model version (see `defaults.default_image_crf`); CRF 0 skips
that step.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import av
import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

from ltx_pipelines.io.errors import MediaError
from ltx_pipelines.io.resize import resize_cover_center_crop, to_model_range

logger = logging.getLogger(__name__)

try:  # Pillow may be built without LittleCMS; colour management is then skipped with a warning.
    from PIL import ImageCms
except ImportError:  # pragma: no cover - depends on the Pillow build
    ImageCms = None  # type: ignore[assignment]

_RECOMPRESS_PRESET = "veryfast"


def _to_srgb(image: Image.Image) -> Image.Image:
    """RGB in sRGB: apply an embedded ICC profile when there is one, else a plain mode conversion."""
    icc = image.info.get("icc_profile")
    if image.mode == "RGBA":
        image = image.convert("RGB")  # alpha is dropped, not composited, as the reference does
    elif image.mode == "LA":
        image = image.convert("L")
    if icc and ImageCms is not None:
        try:
            source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            return ImageCms.profileToProfile(image, source, ImageCms.createProfile("sRGB"), outputMode="RGB")
        except (ImageCms.PyCMSError, OSError, ValueError) as e:
            logger.warning("could not apply the image's ICC profile (%s); using its pixel values as sRGB", e)
    elif icc:
        logger.warning("Pillow has no colour management; ignoring the image's ICC profile")
    return image.convert("RGB")


def image_too_large(path: Path, error: Image.DecompressionBombError) -> str:
    """The line for an image over Pillow's decompression-bomb limit (its pixel count is in `error`)."""
    return f"{str(path)!r} is too large to decode ({error}); downscale it to about the video's size first"


def read_image_rgb(path: str | Path) -> np.ndarray:
    """Decode an image file to (H, W, 3) uint8 sRGB, turned upright per its EXIF orientation."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise MediaError(f"image file not found: {str(p)!r}" if not p.exists() else f"not a file: {str(p)!r}")
    try:
        with Image.open(p) as source:
            upright = ImageOps.exif_transpose(source) or source
            return np.asarray(_to_srgb(upright), dtype=np.uint8).copy()
    except Image.DecompressionBombError as e:
        raise MediaError(image_too_large(p, e)) from None
    except UnidentifiedImageError:
        raise MediaError(
            f"{str(p)!r} is not an image Pillow can read (accepted: PNG, JPEG, WebP, BMP, TIFF, GIF...)"
        ) from None
    except OSError as e:
        raise MediaError(f"could not decode image {str(p)!r}: {e}") from None


def recompress_h264(image: np.ndarray, crf: int) -> np.ndarray:
    """One H.264 (libx264, yuv420p) encode/decode round trip of an (H, W, 3) uint8 image at `crf`.

    The image is cropped to even dimensions first (4:2:0 needs them); CRF 0 or a 1-pixel side
    returns the image unchanged.
    """
    if not 0 <= crf <= 51:
        raise ValueError(f"crf must be in 0..51; got {crf}")
    if crf == 0 or min(image.shape[0], image.shape[1]) < 2:
        return image
    even = np.ascontiguousarray(image[: image.shape[0] // 2 * 2, : image.shape[1] // 2 * 2, :3])
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=1, options={"crf": str(crf), "preset": _RECOMPRESS_PRESET})
        stream.height, stream.width = even.shape[0], even.shape[1]
        # swscale's default matrix on both ways, as in the reference preprocessing.
        frame = av.VideoFrame.from_ndarray(even, format="rgb24").reformat(format="yuv420p")
        out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    buffer.seek(0)
    with av.open(buffer, mode="r") as decoded:
        first = next(decoded.decode(video=0))
        return first.to_ndarray(format="rgb24")


def load_image_conditioning(
    path: str | Path,
    height: int,
    width: int,
    *,
    crf: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """An image file as a one-frame VAE input: (1, 3, 1, height, width) in [-1, 1].

    Upright (EXIF) sRGB, re-compressed once at `crf`, scaled to cover (height, width) and
    centre-cropped.
    """
    pixels = recompress_h264(read_image_rgb(path), crf)
    fitted = resize_cover_center_crop(torch.from_numpy(pixels).to(device), height, width)  # (1, 3, H, W)
    return to_model_range(fitted).permute(1, 0, 2, 3).unsqueeze(0).to(dtype=dtype)
