"""Reading clips, images and audio for preprocessing, and fitting frames to a bucket.

Video and image decoding reuse ltx_pipelines' PyAV/Pillow readers; what is specific to training
data lives here: bicubic resize-to-cover with a centre or random crop (the crop is returned so masks
can be cut identically), temporal subsampling that keeps frame 0, and audio as stereo at the clip's
length (mono duplicated, surround layouts downmixed by FFmpeg's resampler).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import torch
import torch.nn.functional as F

from ltx_pipelines.io import MediaError, iter_video_frames, probe_video, read_image_rgb

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})
CROP_MODES = ("center", "random")
DEFAULT_EXTENSIONS = "mp4,mov,mkv,avi,webm,m4v,png,jpg,jpeg,webp"  # what the commands look for in a folder
IMAGE_FPS = 1.0  # an image becomes a 1-frame sample at 1 fps, as in the reference


def find_media(input_path: Path, extensions: Sequence[str], recursive: bool) -> list[Path]:
    """`input_path` itself when it is a file, else the files under it with one of `extensions`, sorted."""
    if input_path.is_file():
        return [input_path]
    if not input_path.is_dir():
        raise FileNotFoundError(f"input {str(input_path)!r} does not exist")
    wanted = {"." + e.lower().lstrip(".") for e in extensions}
    pattern = "**/*" if recursive else "*"
    return sorted(p for p in input_path.glob(pattern) if p.is_file() and p.suffix.lower() in wanted)


def is_image(path: str | Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


@dataclass(frozen=True)
class MediaInfo:
    frames: int
    height: int
    width: int
    fps: float
    has_audio: bool
    is_image: bool

    @property
    def duration(self) -> float:
        return self.frames / self.fps if self.fps > 0 else 0.0


def probe_media(path: str | Path) -> MediaInfo:
    """Frame count, size, rate and whether there is an audio track; raises MediaError for unreadable files."""
    if is_image(path):
        image = read_image_rgb(path)
        return MediaInfo(1, image.shape[0], image.shape[1], IMAGE_FPS, has_audio=False, is_image=True)
    info = probe_video(path)
    if info.frames < 1 or info.width < 1 or info.height < 1:
        raise MediaError(f"{str(path)!r} has no decodable video frames")
    fps = info.fps if info.fps > 0 else 24.0
    return MediaInfo(info.frames, info.height, info.width, fps, info.has_audio, is_image=False)


def read_frames(path: str | Path, count: int, stride: int = 1) -> torch.Tensor:
    """`count` frames (F, H, W, 3) uint8: frame 0, then every `stride`-th frame after it."""
    if is_image(path):
        if count != 1:
            raise MediaError(f"{str(path)!r} is an image; it gives 1 frame, not {count}")
        return torch.from_numpy(read_image_rgb(path)).unsqueeze(0)
    needed = 1 + (count - 1) * stride
    frames = list(iter_video_frames(path, max_frames=needed))
    if len(frames) < needed:
        raise MediaError(f"{str(path)!r} decoded to {len(frames)} frames; {needed} are needed")
    return torch.stack(frames[::stride][:count])


@dataclass(frozen=True)
class Crop:
    """How a frame was fitted: scaled (to cover the target) to `scaled_height` x `scaled_width`, then
    cut at (`top`, `left`)."""

    scaled_height: int
    scaled_width: int
    top: int
    left: int

    def as_dict(self) -> dict[str, int]:
        return {
            "scaled_height": self.scaled_height,
            "scaled_width": self.scaled_width,
            "top": self.top,
            "left": self.left,
        }


def plan_crop(
    src_height: int,
    src_width: int,
    height: int,
    width: int,
    mode: str = "center",
    generator: torch.Generator | None = None,
) -> Crop:
    if mode not in CROP_MODES:
        raise ValueError(f"crop mode {mode!r} is not one of {CROP_MODES}")
    scale = max(height / src_height, width / src_width)
    # Rounding up keeps the scaled frame at least as large as the target despite float error.
    scaled_h, scaled_w = (
        max(height, math.ceil(src_height * scale - 1e-6)),
        max(width, math.ceil(src_width * scale - 1e-6)),
    )
    if mode == "center":
        return Crop(scaled_h, scaled_w, (scaled_h - height) // 2, (scaled_w - width) // 2)
    top = int(torch.randint(0, scaled_h - height + 1, (1,), generator=generator))
    left = int(torch.randint(0, scaled_w - width + 1, (1,), generator=generator))
    return Crop(scaled_h, scaled_w, top, left)


def crop_like(
    reference: Crop, height: int, width: int, src_height: int, src_width: int, out_h: int, out_w: int
) -> Crop:
    """A crop of another source (e.g. a downscaled reference video) at the same relative position as
    `reference`, which cut `height` x `width` out of its own scaled frame."""
    target = plan_crop(src_height, src_width, out_h, out_w, "center")
    spare_h, spare_w = reference.scaled_height - height, reference.scaled_width - width
    frac_y = reference.top / spare_h if spare_h > 0 else 0.5
    frac_x = reference.left / spare_w if spare_w > 0 else 0.5
    top = round(frac_y * (target.scaled_height - out_h))
    left = round(frac_x * (target.scaled_width - out_w))
    return Crop(target.scaled_height, target.scaled_width, top, left)


def apply_crop(frames: torch.Tensor, crop: Crop, height: int, width: int, mode: str = "bicubic") -> torch.Tensor:
    """(F, H, W, C) any numeric dtype -> float32 (F, C, height, width) in the input's value scale."""
    pixels = frames.permute(0, 3, 1, 2).to(torch.float32)
    if (pixels.shape[-2], pixels.shape[-1]) != (crop.scaled_height, crop.scaled_width):
        antialias = mode in ("bilinear", "bicubic")
        pixels = F.interpolate(
            pixels, size=(crop.scaled_height, crop.scaled_width), mode=mode, align_corners=False, antialias=antialias
        )
    return pixels[:, :, crop.top : crop.top + height, crop.left : crop.left + width]


def frames_to_vae_input(frames: torch.Tensor, crop: Crop, height: int, width: int) -> torch.Tensor:
    """uint8 (F, H, W, 3) -> VAE input (1, 3, F, height, width) in [-1, 1] (bicubic cover + crop)."""
    fitted = apply_crop(frames, crop, height, width).clamp(0.0, 255.0)
    return (fitted / 127.5 - 1.0).permute(1, 0, 2, 3).unsqueeze(0)


@dataclass(frozen=True)
class StereoAudio:
    waveform: torch.Tensor
    """(2, N) float32 in [-1, 1]."""
    sample_rate: int

    @property
    def duration(self) -> float:
        return self.waveform.shape[-1] / self.sample_rate

    def fitted(self, seconds: float) -> StereoAudio:
        """Trimmed, or zero-padded at the end, to exactly `seconds`."""
        samples = round(seconds * self.sample_rate)
        wave = self.waveform[:, :samples]
        if wave.shape[-1] < samples:
            wave = F.pad(wave, (0, samples - wave.shape[-1]))
        return StereoAudio(wave.contiguous(), self.sample_rate)


def read_stereo_audio(path: str | Path, max_duration: float | None = None) -> StereoAudio:
    """The first audio track as stereo float32 at its own rate, from its start, at most `max_duration` s.

    Mono is duplicated to both channels; layouts with more channels (5.1, 7.1) go through FFmpeg's
    stereo downmix (centre and surrounds folded in at the standard levels, LFE dropped).
    """
    p = Path(path)
    if not p.is_file():
        raise MediaError(f"audio file not found: {str(p)!r}")
    try:
        container = av.open(str(p))
    except av.error.FFmpegError as e:
        raise MediaError(f"{str(p)!r} is not a media file FFmpeg can read: {e}") from None
    with container:
        if not container.streams.audio:
            raise MediaError(f"{str(p)!r} has no audio track")
        stream = container.streams.audio[0]
        rate = int(stream.rate or 0)
        if rate <= 0:
            raise MediaError(f"{str(p)!r}: audio track has no sample rate")
        channels = int(stream.codec_context.channels or 0)
        layout = "mono" if channels == 1 else "stereo"
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        limit = None if max_duration is None else math.ceil(max_duration * rate)
        chunks: list[np.ndarray] = []
        total = 0
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray())
                total += chunks[-1].shape[-1]
            if limit is not None and total >= limit:
                break
        else:
            chunks.extend(out.to_ndarray() for out in resampler.resample(None))
    if not chunks:
        raise MediaError(f"no audio decoded from {str(p)!r}")
    wave = torch.from_numpy(np.ascontiguousarray(np.concatenate(chunks, axis=-1), dtype=np.float32))
    if wave.shape[0] == 1:
        wave = wave.expand(2, -1).contiguous()
    if limit is not None:
        wave = wave[:, :limit]
    return StereoAudio(wave, rate)


def audio_duration(path: str | Path) -> float:
    """Length of the first audio track in seconds (decoded, so it is exact for any container)."""
    return read_stereo_audio(path).duration
