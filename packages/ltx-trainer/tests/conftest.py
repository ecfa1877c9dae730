"""Fixtures for the trainer tests: a tiny checkpoint and Gemma folder (built once per session, in the
released formats) and writers for synthetic media made with PyAV: clips with moving shapes, hard cuts
between differently coloured scenes, and a sine tone."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from PIL import Image

from ltx_pipelines.utils.media_io import write_audio, write_video

SCENE_COLOURS = ((200, 40, 40), (230, 230, 230), (40, 60, 200), (30, 30, 30), (220, 200, 40))
# Neighbours differ strongly in hue, saturation or brightness, so every cut is unambiguous.


@dataclass(frozen=True)
class TinyModels:
    checkpoint: Path
    gemma_root: Path


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The demo checkpoint (all components, released key layout and config metadata) and its Gemma folder."""
    from ltx_pipelines.demo_assets import write_demo_checkpoint, write_demo_gemma

    root = tmp_path_factory.mktemp("tiny-models")
    checkpoint, gemma = root / "tiny-ltx.safetensors", root / "gemma"
    write_demo_checkpoint(checkpoint)
    write_demo_gemma(gemma)
    return TinyModels(checkpoint=checkpoint, gemma_root=gemma)


def sine(seconds: float, rate: int = 48_000, hz: float = 440.0, channels: int = 2) -> torch.Tensor:
    t = torch.arange(round(seconds * rate), dtype=torch.float32) / rate
    wave = 0.4 * torch.sin(2 * math.pi * hz * t)
    return wave.expand(channels, -1).contiguous()


def clip_frames(frames: int, height: int, width: int, cuts: Sequence[int] = (), square: int = 16) -> torch.Tensor:
    """(F, H, W, 3) uint8: a white square moving right over a background whose colour changes at each cut."""
    out = torch.empty((frames, height, width, 3), dtype=torch.uint8)
    scene = 0
    for i in range(frames):
        if i in cuts:
            scene += 1
        out[i] = torch.tensor(SCENE_COLOURS[scene % len(SCENE_COLOURS)], dtype=torch.uint8)
        x = (2 * i) % max(1, width - square)
        y = (height - square) // 2
        out[i, y : y + square, x : x + square] = 255
    return out


@pytest.fixture
def make_clip() -> Callable[..., Path]:
    def make(
        path: Path,
        *,
        frames: int = 17,
        height: int = 64,
        width: int = 64,
        fps: float = 24.0,
        cuts: Sequence[int] = (),
        audio: bool = True,
        hz: float = 440.0,
    ) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        wave = sine(frames / fps, hz=hz) if audio else None
        write_video(
            path,
            clip_frames(frames, height, width, cuts),
            fps=fps,
            audio=wave,
            audio_sample_rate=48_000 if audio else None,
            crf=10,
        )
        return path

    return make


@pytest.fixture
def make_image() -> Callable[..., Path]:
    def make(path: Path, *, height: int = 64, width: int = 64) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(clip_frames(1, height, width)[0].numpy()).save(path)
        return path

    return make


@pytest.fixture
def make_wav() -> Callable[..., Path]:
    def make(path: Path, *, seconds: float = 1.0, rate: int = 16_000, hz: float = 330.0) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_audio(path, sine(seconds, rate=rate, hz=hz), rate)

    return make


@pytest.fixture
def make_surround() -> Callable[..., Path]:
    """A 5.1 AAC file whose front-left channel alone carries a tone (for downmix tests)."""

    def make(path: Path, *, seconds: float = 0.5, rate: int = 48_000) -> Path:
        samples = round(seconds * rate)
        wave = np.zeros((6, samples), dtype=np.float32)
        wave[0] = 0.5 * np.sin(2 * np.pi * 440.0 * np.arange(samples) / rate)
        with av.open(str(path), "w", format="mp4") as container:
            stream = container.add_stream("aac", rate=rate, layout="5.1")
            frame = av.AudioFrame.from_ndarray(wave, format="fltp", layout="5.1")
            frame.sample_rate = rate
            frame.pts = 0
            for packet in stream.encode(frame):
                container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
        return path

    return make
