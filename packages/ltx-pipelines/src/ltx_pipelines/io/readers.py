"""Reading video frames and audio tracks (for video- and audio-conditioned pipelines)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import torch

from ltx_pipelines.io.errors import MediaError
from ltx_pipelines.io.resize import resize_cover_center_crop, to_model_range


@dataclass(frozen=True)
class VideoInfo:
    """Stream facts of a media file, read from the container (frames counted by decoding if unknown)."""

    path: Path
    frames: int
    height: int
    width: int
    fps: float
    has_audio: bool
    audio_sample_rate: int | None
    audio_channels: int | None


@dataclass(frozen=True)
class VideoClip:
    frames: torch.Tensor
    """(F, H, W, 3) uint8 RGB."""
    fps: float


@dataclass(frozen=True)
class AudioClip:
    waveform: torch.Tensor
    """(channels, N) float32 in [-1, 1]."""
    sample_rate: int

    @property
    def duration(self) -> float:
        return self.waveform.shape[-1] / self.sample_rate


def _open(path: str | Path) -> av.container.InputContainer:
    p = Path(path).expanduser()
    if not p.is_file():
        raise MediaError(f"media file not found: {str(p)!r}" if not p.exists() else f"not a file: {str(p)!r}")
    try:
        return av.open(str(p), mode="r")
    except av.error.FFmpegError as e:
        raise MediaError(f"{str(p)!r} is not a media file FFmpeg can read: {e}") from None


@contextmanager
def _decoding(path: str | Path, what: str) -> Iterator[None]:
    """FFmpeg's decode errors (a damaged or truncated file passes the container's header checks and fails
    only when its packets are decoded) as a `MediaError` naming the file and the stream."""
    try:
        yield
    except av.error.FFmpegError as e:
        raise MediaError(
            f"{str(Path(path).expanduser())!r}: its {what} cannot be decoded, the file is damaged or truncated ({e})"
        ) from None


def _video_stream(container: av.container.InputContainer, path: str | Path) -> av.VideoStream:
    if not container.streams.video:
        raise MediaError(f"{str(path)!r} has no video stream")
    return container.streams.video[0]


def probe_video(path: str | Path) -> VideoInfo:
    with _open(path) as container:
        stream = _video_stream(container, path)
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        with _decoding(path, "video stream"):
            frames = stream.frames or sum(1 for _ in container.decode(stream))
        audio = container.streams.audio[0] if container.streams.audio else None
        return VideoInfo(
            path=Path(path).expanduser().absolute(),
            frames=int(frames),
            height=int(stream.codec_context.height),
            width=int(stream.codec_context.width),
            fps=float(rate) if rate else 0.0,
            has_audio=audio is not None,
            audio_sample_rate=int(audio.rate) if audio is not None else None,
            audio_channels=int(audio.codec_context.channels) if audio is not None else None,
        )


def check_decodes(path: str | Path, *, video: bool = True, audio: bool = True) -> None:
    """Decode every packet of the first video stream and/or audio track (no pixel conversion), so a damaged
    file is refused with a `MediaError` before a run starts rather than when the run reads it."""
    for what, wanted in (("video stream", video), ("audio track", audio)):
        if not wanted:
            continue
        with _open(path) as container:
            streams = container.streams.video if what == "video stream" else container.streams.audio
            if not streams:
                continue
            with _decoding(path, what):
                for _ in container.decode(streams[0]):
                    pass


def iter_video_frames(
    path: str | Path, *, start_frame: int = 0, max_frames: int | None = None
) -> Iterator[torch.Tensor]:
    """Yield decoded frames as (H, W, 3) uint8 RGB tensors, in decode order, counting from `start_frame`."""
    if start_frame < 0 or (max_frames is not None and max_frames < 0):
        raise ValueError(f"start_frame and max_frames must be >= 0; got {start_frame}, {max_frames}")
    if max_frames == 0:
        return
    with _open(path) as container:
        stream = _video_stream(container, path)
        stream.thread_type = "AUTO"
        produced = index = 0
        frames = container.decode(stream)
        while True:
            with _decoding(path, f"video stream (after {index} frames)"):
                frame = next(frames, None)
            if frame is None:
                return
            index += 1
            if index <= start_frame:
                continue
            yield torch.from_numpy(frame.to_ndarray(format="rgb24"))
            produced += 1
            if max_frames is not None and produced >= max_frames:
                return


def read_video(
    path: str | Path,
    *,
    start_frame: int = 0,
    max_frames: int | None = None,
    size: tuple[int, int] | None = None,
) -> VideoClip:
    """Decode a video to (F, H, W, 3) uint8 and its frame rate.

    `size=(height, width)` scales each frame to cover that size and centre-crops it (rounded back to
    8 bits); for model inputs prefer `frames_to_model_input` on the unscaled frames, which keeps
    the scaled values in float as the reference does.
    """
    fps = probe_video(path).fps
    frames: list[torch.Tensor] = []
    for frame in iter_video_frames(path, start_frame=start_frame, max_frames=max_frames):
        if size is not None:
            fitted = resize_cover_center_crop(frame, *size)[0].permute(1, 2, 0)
            frame = fitted.round().clamp(0, 255).to(torch.uint8)
        frames.append(frame)
    if not frames:
        raise MediaError(f"no frames decoded from {str(path)!r} (start_frame={start_frame}, max_frames={max_frames})")
    return VideoClip(frames=torch.stack(frames), fps=fps)


def frames_to_model_input(
    frames: torch.Tensor,
    height: int,
    width: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """(F, H, W, 3) uint8 frames -> VAE input (1, 3, F, height, width) in [-1, 1] (cover + centre crop)."""
    fitted = resize_cover_center_crop(frames.to(device), height, width)  # (F, 3, h, w)
    return to_model_range(fitted).permute(1, 0, 2, 3).unsqueeze(0).to(dtype=dtype)


def read_audio(
    path: str | Path,
    *,
    start_time: float = 0.0,
    max_duration: float | None = None,
    sample_rate: int | None = None,
) -> AudioClip:
    """The first audio track of a video or audio file as float32 (channels, N), optionally resampled.

    `start_time`/`max_duration` (seconds) select a window; samples are counted from the stream's
    first decoded timestamp, so codec frame boundaries do not shift the window.
    """
    if start_time < 0 or (max_duration is not None and max_duration <= 0):
        raise ValueError(f"start_time must be >= 0 and max_duration > 0; got {start_time}, {max_duration}")
    with _open(path) as container:
        if not container.streams.audio:
            raise MediaError(f"{str(path)!r} has no audio track")
        stream = container.streams.audio[0]
        rate = int(sample_rate or stream.rate)
        if rate <= 0:
            raise MediaError(f"{str(path)!r}: audio track has no sample rate")
        # Converting every frame to planar float at the target rate also handles int and packed formats.
        resampler = av.AudioResampler(format="fltp", layout=stream.layout.name, rate=rate)
        chunks: list[np.ndarray] = []
        first_time: float | None = None
        with _decoding(path, "audio track"):
            for frame in container.decode(stream):
                if first_time is None and frame.pts is not None and frame.time_base is not None:
                    first_time = float(frame.pts * frame.time_base)
                chunks.extend(out.to_ndarray() for out in resampler.resample(frame))
            chunks.extend(out.to_ndarray() for out in resampler.resample(None))
    if not chunks:
        raise MediaError(f"no audio decoded from {str(path)!r}")
    samples = np.concatenate(chunks, axis=-1).astype(np.float32, copy=False)
    begin = max(0, round((start_time - (first_time or 0.0)) * rate))
    end = None if max_duration is None else begin + round(max_duration * rate)
    window = samples[:, begin:end]
    if window.shape[-1] == 0:
        raise MediaError(
            f"{str(path)!r}: no audio at start_time={start_time}s (track length {samples.shape[-1] / rate:.3f}s)"
        )
    return AudioClip(waveform=torch.from_numpy(np.ascontiguousarray(window)), sample_rate=rate)
