"""Fixtures for the trainer tests: a tiny checkpoint and Gemma folder (built once per session, in the
released formats) and writers for synthetic media made with PyAV: clips with moving shapes, hard cuts
between differently coloured scenes, and a sine tone."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from PIL import Image

from ltx_pipelines.io import write_audio, write_video

SCENE_COLOURS = ((200, 40, 40), (230, 230, 230), (40, 60, 200), (30, 30, 30), (220, 200, 40))
# Neighbours differ strongly in hue, saturation or brightness, so every cut is unambiguous.


@dataclass(frozen=True)
class TinyModels:
    checkpoint: Path
    gemma_root: Path


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The demo checkpoint (all components, released key layout and config metadata) and its Gemma folder."""
    from ltx_pipelines.demo import write_demo_checkpoint, write_demo_gemma

    root = tmp_path_factory.mktemp("tiny-models")
    checkpoint, gemma = root / "tiny-ltx.safetensors", root / "gemma"
    write_demo_checkpoint(checkpoint)
    write_demo_gemma(gemma)
    return TinyModels(checkpoint=checkpoint, gemma_root=gemma)


@pytest.fixture(scope="session")
def checkpoint(tiny_models: TinyModels) -> Path:
    """The tiny checkpoint alone, for tests that need no Gemma."""
    return tiny_models.checkpoint


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small precomputed dataset (`training_data.write_dataset`), one per test module."""
    sys.path.insert(0, str(Path(__file__).parent))
    from training_data import write_dataset

    return write_dataset(tmp_path_factory.mktemp("data"))


# -- a video VAE that reconstructs block-constant video -------------------------------------------------

_BIAS = 1000.0  # added to every colour channel and held in a constant channel: PixelNorm then only rescales


def _silu_slope(x: float) -> float:
    sig = 1.0 / (1.0 + math.exp(-x))
    return sig + x * sig * (1.0 - sig)


def _centre_tap(conv: torch.nn.Conv3d, out_channel: int, in_channel: int, value: float, time_index: int) -> None:
    conv.weight.data[out_channel, in_channel, time_index, 1, 1] = value


def block_mean_vae(config: dict) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The demo architecture with weights set by hand so that the encoder keeps each latent cell's mean
    colour (latent channel 2c + h: colour c over the first / second half of the cell's frames) and the
    decoder paints that colour back over the cell's 32 x 32 pixels and frames. Every residual branch
    is zero, every resampling conv copies channels, and a large constant channel makes the PixelNorm
    before the output conv a near-constant rescale, which the output conv undoes."""
    from ltx_core.model.video_vae import VIDEO_DECODER, VIDEO_ENCODER
    from ltx_core.model.video_vae.blocks import DepthToSpaceUpsample

    with torch.device("cpu"):
        encoder, decoder = VIDEO_ENCODER.configurator(config), VIDEO_DECODER.configurator(config)
    for module in (encoder, decoder):
        for name, tensor in module.state_dict().items():
            if "per_channel_statistics" not in name:
                tensor.zero_()
    # Encoder: 4x4 patches -> mean colour (+ bias) in channels 0-2, the constant in channel 3; the
    # space-to-depth blocks then average; the last one splits each channel into two time halves.
    patch = encoder.config.patch_size
    for c in range(3):
        for k in range(patch * patch):
            _centre_tap(encoder.conv_in.conv, c, c * patch * patch + k, 1.0 / patch**2, time_index=2)
        encoder.conv_in.conv.bias.data[c] = _BIAS
    encoder.conv_in.conv.bias.data[3] = _BIAS
    width = encoder.conv_out.conv.in_channels
    x0 = math.sqrt(width / 8.0)  # every one of the 8 live channels is about _BIAS before the norm
    gain = (_BIAS / x0) / _silu_slope(x0)
    for channel in range(6):  # latent channel 2c + h <- colour c, half h, minus the constant channel
        _centre_tap(encoder.conv_out.conv, channel, channel, gain, time_index=2)
        _centre_tap(encoder.conv_out.conv, channel, 6, -gain, time_index=2)
    # Decoder (non-causal: centre tap in time is 1): colour = mean of the halves (+ bias), constant channel.
    for c in range(3):
        _centre_tap(decoder.conv_in.conv, c, 2 * c, 0.5, time_index=1)
        _centre_tap(decoder.conv_in.conv, c, 2 * c + 1, 0.5, time_index=1)
        decoder.conv_in.conv.bias.data[c] = _BIAS
    decoder.conv_in.conv.bias.data[3] = _BIAS
    for block in decoder.up_blocks:
        if isinstance(block, DepthToSpaceUpsample):
            volume = math.prod(block.stride)
            for c in range(4):
                for sub in range(volume):
                    _centre_tap(block.conv.conv, c * volume + sub, c, 1.0, time_index=1)
    x0 = 1.0  # four live channels of about _BIAS
    gain = (_BIAS / x0) / _silu_slope(x0)
    for c in range(3):
        for k in range(patch * patch):
            _centre_tap(decoder.conv_out.conv, c * patch * patch + k, c, gain, time_index=1)
            _centre_tap(decoder.conv_out.conv, c * patch * patch + k, 3, -gain, time_index=1)
    return encoder, decoder


@pytest.fixture(scope="session")
def block_mean_checkpoint(tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint with its video VAE replaced by `block_mean_vae` (kept in float32)."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    from ltx_pipelines.demo.files import file_keys_of

    with safe_open(str(tiny_models.checkpoint), framework="pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not a mapping
    encoder, decoder = block_mean_vae(json.loads(metadata["config"]))
    tensors.update(file_keys_of("video_encoder", encoder))
    tensors.update(file_keys_of("video_decoder", decoder))
    path = tmp_path_factory.mktemp("block-mean") / "block-mean-vae.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


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
