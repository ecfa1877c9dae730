"""Fixtures for the audio tests: golden-built models, tiny configs and checkpoint writing."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from ltx_core.loader import build_model
from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER

# A small audio VAE in the released layout (3 levels, causal in time, pixel norm).
TINY_AUDIO_VAE: dict[str, Any] = {
    "model": {
        "params": {
            "ddconfig": {
                "double_z": True,
                "mel_bins": 64,
                "z_channels": 8,
                "resolution": 256,
                "downsample_time": False,
                "in_channels": 2,
                "out_ch": 2,
                "ch": 16,
                "ch_mult": [1, 2, 2],
                "num_res_blocks": 1,
                "attn_resolutions": [],
                "dropout": 0.0,
                "mid_block_add_attention": False,
                "norm_type": "pixel",
                "causality_axis": "height",
            },
            "sampling_rate": 16000,
        }
    },
    "preprocessing": {"audio": {"sampling_rate": 16000}, "stft": {"hop_length": 160}},
}

# Small generators in both vocoder layouts.
TINY_PLAIN_VOCODER: dict[str, Any] = {
    "resblock": "1",
    "resblock_kernel_sizes": [3, 5],
    "resblock_dilation_sizes": [[1, 3], [1, 3]],
    "stereo": True,
    "upsample_initial_channel": 32,
    "upsample_rates": [8, 6, 5],
    "upsample_kernel_sizes": [16, 12, 11],
}

TINY_BWE_VOCODER: dict[str, Any] = {
    "vocoder": {
        "resblock": "AMP1",
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1, 3]],
        "stereo": True,
        "use_tanh_at_final": False,
        "activation": "snakebeta",
        "use_bias_at_final": False,
        "upsample_initial_channel": 32,
        "upsample_rates": [8, 5, 4],
        "upsample_kernel_sizes": [16, 11, 8],
    },
    "bwe": {
        "resblock": "AMP1",
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1]],
        "stereo": True,
        "use_tanh_at_final": False,
        "activation": "snakebeta",
        "use_bias_at_final": False,
        "upsample_initial_channel": 8,
        "upsample_rates": [4, 3],
        "upsample_kernel_sizes": [8, 7],
        "apply_final_activation": False,
        "input_sampling_rate": 16000,
        "output_sampling_rate": 48000,
        "hop_length": 4,
        "n_fft": 32,
        "win_size": 32,
        "num_mels": 16,
    },
}


@pytest.fixture
def tiny_audio_vae_config() -> Callable[..., dict[str, Any]]:
    """tiny_audio_vae_config(**ddconfig_overrides) -> a whole checkpoint `config` with that audio VAE."""

    def make(**overrides: Any) -> dict[str, Any]:
        section = copy.deepcopy(TINY_AUDIO_VAE)
        section["model"]["params"]["ddconfig"].update(overrides)
        return {"audio_vae": section}

    return make


@pytest.fixture
def tiny_vocoder_config() -> Callable[..., dict[str, Any]]:
    """tiny_vocoder_config(bwe: bool, **generator_overrides) -> a whole checkpoint `config` with that vocoder."""

    def make(bwe: bool = False, **overrides: Any) -> dict[str, Any]:
        section = copy.deepcopy(TINY_BWE_VOCODER if bwe else TINY_PLAIN_VOCODER)
        (section["vocoder"] if bwe else section).update(overrides)
        return {"vocoder": section}

    return make


def randomize_(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every parameter (not the fixed filter buffers) random values of a sensible scale."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            scale = 0.3 if name.endswith(("alpha", "beta", "bias")) else 1.0 / max(1, p[0].numel()) ** 0.5
            p.copy_(torch.randn(p.shape, generator=gen) * scale)
        for name, b in module.named_buffers():
            if name.endswith("std-of-means"):
                b.copy_(torch.rand(b.shape, generator=gen) + 0.5)
            elif name.endswith("mean-of-means"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.1)
    return module.eval()


@pytest.fixture
def randomize() -> Callable[..., nn.Module]:
    return randomize_


def prefixed(prefix: str, module: nn.Module, skip: str = "") -> dict[str, torch.Tensor]:
    """`module`'s state dict under file keys `prefix + key`, leaving out keys that start with `skip`."""
    return {prefix + k: v for k, v in module.state_dict().items() if not (skip and k.startswith(skip))}


@pytest.fixture
def write_checkpoint(tmp_path: Path) -> Callable[..., Path]:
    """write_checkpoint(config, tensors) -> a single-file checkpoint with that `config` metadata."""

    def write(config: dict[str, Any], tensors: dict[str, torch.Tensor], name: str = "ckpt.safetensors") -> Path:
        path = tmp_path / name
        contiguous = {k: v.detach().clone().contiguous() for k, v in tensors.items()}
        save_file(contiguous, str(path), metadata={"config": json.dumps(config), "model_version": "2.3.0"})
        return path

    return write


@pytest.fixture
def state_under() -> Callable[..., dict[str, torch.Tensor]]:
    return prefixed


@pytest.fixture(scope="session")
def golden_audio_models(golden_model_source: Any) -> dict[str, nn.Module]:
    """Encoder, decoder and vocoder of the golden checkpoint (or its diffusers folder), built as the
    pipelines build them."""
    return {
        name: build_model(spec, golden_model_source, dtype=torch.float32, device="cpu")
        for name, spec in (("encoder", AUDIO_ENCODER), ("decoder", AUDIO_DECODER), ("vocoder", VOCODER))
    }
