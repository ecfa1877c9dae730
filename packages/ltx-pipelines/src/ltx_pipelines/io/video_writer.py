"""MP4 output: H.264 video (yuv420p, BT.709 tags) with an optional stereo AAC track, written atomically.

Frames arrive as an iterator of chunks (e.g. straight from a tiled VAE decode). The chunk being
produced and the one being compressed overlap: x264 runs on a background thread fed through a
one-slot queue, so at most about two chunks are in memory, and audio is muxed alongside the video
so the container never buffers more than a chunk's worth of packets.

RGB -> 8-bit YUV 4:2:0 with BT.709 coefficients in limited ("MPEG", 16-235) range, in torch.

Converting from the decoder's float output directly (on its device) avoids an 8-bit RGB
intermediate and keeps libswscale out of the encode loop; the stream is tagged BT.709 to match.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from queue import Queue
from typing import TYPE_CHECKING, TypedDict

import av
import numpy as np
import torch
import torch.nn.functional as F

from ltx_pipelines.io.atomic_files import atomic_output
from ltx_pipelines.io.errors import MediaError
from ltx_pipelines.io.progress import progress

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)


DEFAULT_VIDEO_CRF = 19


DEFAULT_X264_PRESET = "veryfast"


# x264's macroblock tree reads memory it never wrote: with it on, the same frames gave another bitstream
# in about one encode in ten (and more often on a worker thread), so a seed did not reproduce its video.
# With it off every encode is identical; the cost is a few percent of bitrate at the same CRF.
_X264_PARAMS = "mbtree=0"


DEFAULT_X264_THREADS = 0  # x264's own choice; the output depends on the count, not on timing


_CONTAINER_FORMATS = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska"}


# FFmpeg AVCOL_* codes for BT.709 primaries / transfer / matrix, and limited (MPEG) range.
_AVCOL_BT709 = 1


_AVCOL_RANGE_MPEG = 1


# The NTSC-style rates written as 23.976 etc. on the command line mean n * 1000 / 1001.
_NTSC_BASES = (24, 30, 48, 60, 120)


_AUDIO_BLOCK = 48_000  # samples handed to the AAC encoder at a time (PyAV re-chunks to 1024)


@dataclass(frozen=True)
class WrittenVideo:
    """What was written: the final path and the stream facts a caller may want to log."""

    path: Path
    frames: int
    width: int
    height: int
    fps: Fraction
    audio_samples: int
    audio_sample_rate: int | None


def fps_fraction(fps: float | Fraction) -> Fraction:
    """A container frame rate for `fps`: exact for integers, n*1000/1001 for 23.976/29.97/59.94-style rates."""
    if isinstance(fps, Fraction):
        rate = fps
    else:
        if not np.isfinite(fps) or fps <= 0:
            raise ValueError(f"frame rate must be a positive number; got {fps}")
        for base in _NTSC_BASES:
            ntsc = Fraction(base * 1000, 1001)
            if abs(fps - float(ntsc)) < 5e-4:
                return ntsc
        rate = Fraction(fps).limit_denominator(1001)
    if rate <= 0:
        raise ValueError(f"frame rate must be positive; got {fps}")
    return rate


def _stereo_waveform(audio: torch.Tensor) -> np.ndarray:
    """(2, N), (1, 2, N) or mono (1, N) float waveform -> contiguous float32 (2, N) in [-1, 1]."""
    wave = audio.detach()
    if wave.ndim == 3 and wave.shape[0] == 1:
        wave = wave[0]
    if wave.ndim != 2 or wave.shape[0] not in (1, 2) or wave.shape[1] == 0:
        raise MediaError(f"audio must be a (2, N) waveform (or (1, 2, N), or mono (1, N)); got {tuple(audio.shape)}")
    if wave.shape[0] == 1:
        wave = wave.expand(2, -1)
    return np.ascontiguousarray(wave.to(device="cpu", dtype=torch.float32).clamp(-1.0, 1.0).numpy())


class _AudioFeeder:
    """Hands the waveform to the AAC encoder up to a given time, so audio interleaves with video."""

    def __init__(self, container: av.container.OutputContainer, waveform: np.ndarray, sample_rate: int) -> None:
        self.container = container
        self.waveform = waveform
        self.sample_rate = sample_rate
        self.stream = container.add_stream("aac", rate=sample_rate)
        self.stream.codec_context.layout = "stereo"
        self.stream.codec_context.time_base = Fraction(1, sample_rate)
        self.position = 0

    def feed_until(self, seconds: float | None) -> None:
        total = self.waveform.shape[1]
        end = total if seconds is None else min(total, round(seconds * self.sample_rate))
        self._feed(end)

    def _feed(self, end: int) -> None:
        """Encode samples up to `end`; past the waveform's last sample, silence."""
        total = self.waveform.shape[1]
        while self.position < end:
            stop = min(end, self.position + _AUDIO_BLOCK)
            if self.position < total:
                stop = min(stop, total)
                block = self.waveform[:, self.position : stop]
            else:
                block = np.zeros((2, stop - self.position), dtype=np.float32)
            frame = av.AudioFrame.from_ndarray(block, format="fltp", layout="stereo")
            frame.sample_rate = self.sample_rate
            frame.pts = self.position
            frame.time_base = Fraction(1, self.sample_rate)
            self.container.mux(self.stream.encode(frame))
            self.position = stop

    def finish(self, video_seconds: Fraction | None = None) -> None:
        """Encode the rest of the waveform, padded with silence to `video_seconds` when it is shorter: the
        audio decoder gives (latent frames - 1) * 4 + 1 mel frames, 20-30 ms short of the video (the
        reference's output is as short; its writer muxes the waveform as it is)."""
        self.feed_until(None)
        if video_seconds is not None:
            self._feed(math.ceil(video_seconds * self.sample_rate))
        self.container.mux(self.stream.encode(None))


class _BackgroundVideoEncoder:
    """Encodes I420 frame chunks on a worker thread; errors surface in `submit`/`finish`."""

    _STOP = object()

    def __init__(self, container: av.container.OutputContainer, stream: av.VideoStream, audio: _AudioFeeder | None):
        self.container = container
        self.stream = stream
        self.audio = audio
        self.fps = stream.codec_context.framerate
        self.frames = 0
        self._queue: Queue[object] = Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="h264-encoder", daemon=True)
        self._thread.start()

    def _encode(self, planes: np.ndarray) -> None:
        for plane in planes:
            frame = av.VideoFrame.from_ndarray(plane, format="yuv420p")
            frame.pts = self.frames
            frame.colorspace = _AVCOL_BT709
            frame.color_range = _AVCOL_RANGE_MPEG
            self.container.mux(self.stream.encode(frame))
            self.frames += 1
        if self.audio is not None:
            self.audio.feed_until(self.frames / self.fps)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is self._STOP:
                return
            if self._error is not None:
                continue  # drain after a failure so the producer never blocks
            try:
                self._encode(item)  # type: ignore[arg-type]
            except BaseException as e:  # re-raised on the caller's thread
                self._error = e

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, planes: np.ndarray) -> None:
        self._raise_if_failed()
        self._queue.put(planes)

    def stop(self) -> None:
        """End the worker (idempotent); call on every path so no thread outlives the write."""
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()

    def finish(self) -> None:
        self.stop()
        self._raise_if_failed()
        self.container.mux(self.stream.encode(None))
        if self.audio is not None:
            self.audio.finish(Fraction(self.frames) / Fraction(self.fps))


def _check_chunk(chunk: torch.Tensor, size: tuple[int, int] | None) -> tuple[int, int]:
    if not isinstance(chunk, torch.Tensor) or chunk.ndim != 4 or chunk.shape[-1] != 3:
        shape = tuple(chunk.shape) if isinstance(chunk, torch.Tensor) else type(chunk).__name__
        raise MediaError(f"video chunks must be (F, H, W, 3) tensors, uint8 or float in [0, 1]; got {shape}")
    chunk_size = (int(chunk.shape[1]), int(chunk.shape[2]))
    if size is not None and chunk_size != size:
        raise MediaError(f"all video chunks must share one frame size; got {chunk_size} after {size} (H, W)")
    if chunk_size[0] % 2 or chunk_size[1] % 2:
        raise MediaError(f"H.264 yuv420p needs an even frame size; got {chunk_size[1]}x{chunk_size[0]} (W x H)")
    return chunk_size


class VideoEncoding(TypedDict, total=False):
    """The options of `write_video` and `encode_video` beside the frames and their rate (defaults: those of
    `encode_video`)."""

    audio: torch.Tensor | None
    """A stereo (2, N) float waveform in [-1, 1] at `audio_sample_rate` (the vocoder's rate); None: silent."""
    audio_sample_rate: int | None
    crf: int
    """x264's constant rate factor, 0..51."""
    preset: str
    expected_frames: int | None
    """When given, a different frame count is an error."""
    total_chunks: int | None
    """How many chunks the frames come in, for the progress bar."""
    encoder_threads: int
    """x264 threads (0: x264 chooses from the CPU count). The same frames and thread count always give the same
    file."""


def write_video(
    output_path: str | Path,
    frames: Iterable[torch.Tensor] | torch.Tensor,
    *,
    fps: float | Fraction,
    overwrite: bool = False,
    **encoding: Unpack[VideoEncoding],
) -> WrittenVideo:
    """Encode `frames` (one (F, H, W, 3) tensor or an iterator of them) to `output_path` at `fps`, with the
    options of `VideoEncoding`. The file appears only once complete; an existing file is kept unless
    `overwrite`.
    """
    path = Path(output_path)
    _container_format(path)  # an unsupported name is refused before anything is created
    with atomic_output(path, overwrite=overwrite) as tmp:
        written = encode_video(tmp, frames, fps=fps, container_suffix=path.suffix, **encoding)
    written = dataclasses.replace(written, path=path.expanduser().absolute())
    logger.info(
        "wrote %s: %d frames %dx%d at %s fps%s",
        path,
        written.frames,
        written.width,
        written.height,
        written.fps,
        f", {written.audio_samples} audio samples at {written.audio_sample_rate} Hz" if written.audio_samples else "",
    )
    return written


def _container_format(path: Path, suffix: str | None = None) -> str:
    container_format = _CONTAINER_FORMATS.get((suffix or path.suffix).lower())
    if container_format is None:
        raise MediaError(f"unsupported video output {str(path)!r}; accepted extensions: {sorted(_CONTAINER_FORMATS)}")
    return container_format


def _checked_waveform(audio: torch.Tensor | None, audio_sample_rate: int | None) -> torch.Tensor | None:
    if audio is None:
        return None
    if audio_sample_rate is None or audio_sample_rate <= 0:
        raise ValueError(f"audio needs a positive audio_sample_rate; got {audio_sample_rate}")
    return _stereo_waveform(audio)


def _frame_chunks(frames: Iterable[torch.Tensor] | torch.Tensor) -> tuple[torch.Tensor, Iterator[torch.Tensor]]:
    """The first chunk (read ahead: it sizes the stream) and an iterator over all chunks from it on."""
    chunks: Iterator[torch.Tensor] = iter([frames]) if isinstance(frames, torch.Tensor) else iter(frames)
    first = next(chunks, None)
    if first is None:
        raise MediaError("no video frames to write: the frame iterator was empty")
    return first, itertools.chain([first], chunks)


def _add_h264_stream(
    container: av.container.OutputContainer,
    rate: Fraction,
    size: tuple[int, int],
    *,
    crf: int,
    preset: str,
    threads: int,
) -> av.VideoStream:
    """The libx264 yuv420p stream, tagged BT.709 limited range (what `rgb_to_yuv420p_bt709` produces)."""
    options = {"crf": str(crf), "preset": preset, "x264-params": _X264_PARAMS}
    stream = container.add_stream("libx264", rate=rate, options=options)
    height, width = size
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    cc = stream.codec_context
    cc.thread_count = threads
    cc.colorspace, cc.color_primaries, cc.color_trc = _AVCOL_BT709, _AVCOL_BT709, _AVCOL_BT709
    cc.color_range = _AVCOL_RANGE_MPEG
    return stream


def encode_video(
    path: Path,
    frames: Iterable[torch.Tensor] | torch.Tensor,
    *,
    fps: float | Fraction,
    audio: torch.Tensor | None = None,
    audio_sample_rate: int | None = None,
    container_suffix: str | None = None,
    crf: int = DEFAULT_VIDEO_CRF,
    preset: str = DEFAULT_X264_PRESET,
    expected_frames: int | None = None,
    total_chunks: int | None = None,
    encoder_threads: int = DEFAULT_X264_THREADS,
) -> WrittenVideo:
    """`write_video` straight into `path` (an existing file there is truncated): for callers that manage
    the temporary name themselves. `container_suffix` (default: `path`'s) picks the container."""
    path = Path(path)
    container_format = _container_format(path, container_suffix)
    if not 0 <= crf <= 51:
        raise ValueError(f"crf must be in 0..51; got {crf}")
    if encoder_threads < 0:
        raise ValueError(f"encoder_threads must be 0 (automatic) or a positive count; got {encoder_threads}")
    rate = fps_fraction(fps)
    waveform = _checked_waveform(audio, audio_sample_rate)
    first, chunks = _frame_chunks(frames)
    height, width = _check_chunk(first, None)

    container = av.open(str(path), mode="w", format=container_format)
    encoder: _BackgroundVideoEncoder | None = None
    try:
        stream = _add_h264_stream(container, rate, (height, width), crf=crf, preset=preset, threads=encoder_threads)
        feeder = _AudioFeeder(container, waveform, audio_sample_rate) if waveform is not None else None
        encoder = _BackgroundVideoEncoder(container, stream, feeder)
        for chunk in progress(chunks, desc="encode video", total=total_chunks, unit="chunk"):
            _check_chunk(chunk, (height, width))
            encoder.submit(rgb_to_yuv420p_bt709(chunk).cpu().numpy())
        encoder.finish()
        if expected_frames is not None and encoder.frames != expected_frames:
            raise MediaError(f"expected {expected_frames} video frames but the iterator gave {encoder.frames}")
    except BaseException:
        if encoder is not None:
            encoder.stop()
        try:
            container.close()
        except Exception as close_error:  # the original error matters more
            logger.debug("closing the failed output raised %s", close_error)
        raise
    container.close()

    return WrittenVideo(
        path=path.expanduser().absolute(),
        frames=encoder.frames,
        width=width,
        height=height,
        fps=rate,
        audio_samples=0 if feeder is None else feeder.position,
        audio_sample_rate=audio_sample_rate if waveform is not None else None,
    )


def write_audio(output_path: str | Path, audio: torch.Tensor, sample_rate: int, *, overwrite: bool = False) -> Path:
    """Write a stereo waveform as 16-bit PCM `.wav` (the audio-only pipelines' output), atomically."""
    path = Path(output_path)
    if path.suffix.lower() != ".wav":
        raise MediaError(f"audio output must be a .wav file; got {str(path)!r}")
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive; got {sample_rate}")
    waveform = _stereo_waveform(audio)
    samples = np.ascontiguousarray((waveform.T * 32767.0).round().astype(np.int16).reshape(1, -1))
    with atomic_output(path, overwrite=overwrite) as tmp:
        container = av.open(str(tmp), mode="w", format="wav")
        try:
            stream = container.add_stream("pcm_s16le", rate=sample_rate)
            stream.codec_context.layout = "stereo"
            frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="stereo")
            frame.sample_rate = sample_rate
            frame.pts = 0
            container.mux(stream.encode(frame))
            container.mux(stream.encode(None))
        finally:
            container.close()
    logger.info("wrote %s: %d samples at %d Hz", path, waveform.shape[1], sample_rate)
    return path.expanduser().absolute()


_KR, _KB = 0.2126, 0.0722  # BT.709 luma weights of red and blue


_KG = 1.0 - _KR - _KB


def rgb_to_yuv420p_bt709(frames: torch.Tensor) -> torch.Tensor:
    """(F, H, W, 3) RGB, uint8 or float in [0, 1] -> (F, H * 3 // 2, W) uint8 planar I420 (Y, then U, then V).

    H and W must be even. Chroma is the 2x2 mean of each block (RGB -> Cb/Cr is linear, so the
    mean can be taken before the conversion).
    """
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected RGB frames shaped (F, H, W, 3); got {tuple(frames.shape)}")
    n, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ValueError(f"yuv420p needs an even frame size; got {w}x{h} (width x height)")
    if frames.dtype == torch.uint8:
        rgb = frames.to(torch.float32) / 255.0
    else:
        rgb = frames.to(torch.float32).clamp(0.0, 1.0)
    rgb = rgb.permute(0, 3, 1, 2)  # (F, 3, H, W)
    r, g, b = rgb.unbind(1)
    luma = _KR * r + _KG * g + _KB * b

    pooled = F.avg_pool2d(rgb, kernel_size=2)
    pr, pg, pb = pooled.unbind(1)
    pooled_luma = _KR * pr + _KG * pg + _KB * pb
    cb = (pb - pooled_luma) / (2.0 * (1.0 - _KB))
    cr = (pr - pooled_luma) / (2.0 * (1.0 - _KR))

    y_codes = (luma * 219.0 + 16.0).round().clamp(0, 255).to(torch.uint8)
    u_codes = (cb * 224.0 + 128.0).round().clamp(0, 255).to(torch.uint8)
    v_codes = (cr * 224.0 + 128.0).round().clamp(0, 255).to(torch.uint8)
    planes = torch.cat([y_codes.reshape(n, -1), u_codes.reshape(n, -1), v_codes.reshape(n, -1)], dim=1)
    return planes.reshape(n, h * 3 // 2, w)
