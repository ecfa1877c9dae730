"""The transformer call's estimate: weights under quantization / streaming, activations, the host's output (the
whole run's phases and the check against free memory: tests/memory)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.memory_estimate import (
    WorkloadShape,
    estimate_peak_memory,
    transformer_weight_bytes,
)
from ltx_core.model.transformer import configure_transformer
from ltx_core.runtime import RuntimeOptions

from .conftest import FLAG_SETS

# Every test on the LTX-2.3 and the LTX-2.5 flag sets (meta-device models: cheap).
pytestmark = pytest.mark.parametrize("flag_set", sorted(FLAG_SETS))


@pytest.fixture
def tiny_config(tiny_config, flag_set):
    tiny_config["transformer"].update(FLAG_SETS[flag_set])
    return tiny_config


def test_weight_bytes_count_every_tensor_once(tiny_config):
    non_block, block, blocks = transformer_weight_bytes(tiny_config, RuntimeOptions(), torch.bfloat16)
    model = configure_transformer(tiny_config)
    assert non_block + blocks * block == sum(t.numel() * 2 for t in model.state_dict().values())


def test_fp8_and_streaming_shrink_the_weights(tiny_config):
    tiny_config["transformer"]["num_layers"] = 8
    work = WorkloadShape(video_tokens=64, audio_tokens=16, text_tokens=8)
    full = estimate_peak_memory(tiny_config, RuntimeOptions(), work)
    fp8 = estimate_peak_memory(tiny_config, RuntimeOptions(quantization="fp8-cast"), work)
    streamed = estimate_peak_memory(tiny_config, RuntimeOptions(offload="disk", device_slots=2), work)
    non_block, block, _ = transformer_weight_bytes(tiny_config, RuntimeOptions(), torch.bfloat16)
    assert fp8.weights < full.weights
    assert streamed.weights == non_block + 2 * block
    assert full.activations == fp8.activations == streamed.activations > 0
    per_token = estimate_peak_memory(tiny_config, RuntimeOptions(), WorkloadShape(64, 16, 8, shared_timesteps=False))
    assert per_token.activations > full.activations


def _clip(frames: int, height: int = 128, width: int = 192) -> WorkloadShape:
    """A workload whose decoded clip is `frames` long (tokens and the VAE tile as the CLI gives them)."""
    tokens = ((frames - 1) // 8 + 1) * (height // 32) * (width // 32)
    seconds = frames / 24
    return WorkloadShape(
        video_tokens=tokens, audio_tokens=int(seconds * 25) + 1, text_tokens=8,
        vae_tile_frames=min(frames, 65), vae_tile_height=height, vae_tile_width=width,
        output_frames=frames, output_height=height, output_width=width,
        audio_samples=round(seconds * 48_000), latent_values=128 * tokens,
    )  # fmt: skip


def test_the_host_memory_grows_with_the_clip(tiny_config):
    """The decoded frames are held as float32 RGB on the host until written: at least 12 bytes a pixel more
    for every frame, counted on the CPU's peak (and on its own against the host RAM of a CUDA run)."""
    short, long = (estimate_peak_memory(tiny_config, RuntimeOptions(), _clip(n)) for n in (2401, 7201))
    frames_bytes = (7201 - 2401) * 128 * 192 * 3 * 4
    assert long.host_peak - short.host_peak >= frames_bytes
    assert long.host_output - short.host_output >= frames_bytes
