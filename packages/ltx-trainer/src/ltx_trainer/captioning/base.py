"""The captioner interface and the media a request carries: sampled frames and the audio track."""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from PIL import Image

from ltx_pipelines.io import MediaError, iter_video_frames, probe_video, read_audio, read_image_rgb
from ltx_trainer.preprocessing.media import is_image

CAPTION_KEY = "combined_caption_english"
AUDIO_SAMPLE_RATE = 16_000  # what speech/audio encoders of omni models expect
MAX_FRAMES = 64
MAX_SIDE = 512

DEFAULT_INSTRUCTION = (
    "You are writing a training caption for a video generation model. Watch the whole clip and listen to "
    "its audio, then describe it in one continuous paragraph of plain English: the subjects and their "
    "appearance, what happens in order, the setting, lighting, colours and camera movement; then the "
    "sound: speech (quoted word for word when intelligible, with who says it), music, and other sounds. "
    "Describe only what is seen and heard; do not guess at anything else and do not start with phrases "
    f'such as "The video shows". Answer with JSON only: {{"{CAPTION_KEY}": "<the caption>"}}'
)


@dataclass(frozen=True)
class MediaSample:
    """What a captioner is shown: JPEG frames sampled at a fixed rate and the audio as 16 kHz mono WAV."""

    path: Path
    frames_jpeg: tuple[bytes, ...]
    frame_times: tuple[float, ...]
    audio_wav: bytes | None
    duration: float


class Captioner(Protocol):
    name: str

    def caption(self, media: Path) -> str:
        """The caption for one video or image file (raises on failure)."""
        ...


def _jpeg(frame: np.ndarray) -> bytes:
    image = Image.fromarray(frame)
    scale = MAX_SIDE / max(image.size)
    if scale < 1:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def wav_bytes(waveform: torch.Tensor, sample_rate: int) -> bytes:
    """(channels, N) float in [-1, 1] -> 16-bit PCM mono WAV file bytes."""
    mono = waveform.float().mean(dim=0).clamp(-1.0, 1.0).numpy()
    pcm = (mono * 32767.0).round().astype("<i2").tobytes()
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm)
    return buffer.getvalue()


def load_media_sample(path: str | Path, fps: float = 2.0, with_audio: bool = True) -> MediaSample:
    """Frames every 1/`fps` seconds (at most MAX_FRAMES, evenly spread when longer) and the audio track."""
    p = Path(path)
    if fps <= 0:
        raise ValueError(f"--fps must be positive; got {fps}")
    if is_image(p):
        return MediaSample(p, (_jpeg(read_image_rgb(p)),), (0.0,), None, 0.0)
    info = probe_video(p)
    rate = info.fps or 24.0
    duration = info.frames / rate
    wanted = max(1, min(MAX_FRAMES, int(duration * fps) + 1))
    indices = sorted({min(info.frames - 1, round(i * (info.frames - 1) / max(1, wanted - 1))) for i in range(wanted)})
    picked = set(indices)
    frames: list[bytes] = []
    times: list[float] = []
    for index, frame in enumerate(iter_video_frames(p, max_frames=indices[-1] + 1)):
        if index in picked:
            frames.append(_jpeg(frame.numpy()))
            times.append(index / rate)
    if not frames:
        raise MediaError(f"no frames decoded from {str(p)!r}")
    audio = None
    if with_audio and info.has_audio:
        track = read_audio(p, sample_rate=AUDIO_SAMPLE_RATE)
        audio = wav_bytes(track.waveform, track.sample_rate)
    return MediaSample(p, tuple(frames), tuple(times), audio, duration)
