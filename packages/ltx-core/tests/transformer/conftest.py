"""Tiny transformer configs and inputs shared by the transformer tests (random weights, no golden files)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch

from ltx_core.model.transformer import LTXModel, Modality, ModelVariant, configure_transformer

TINY_TRANSFORMER: dict[str, Any] = {
    "activation_fn": "gelu-approximate",
    "qk_norm": "rms_norm",
    "norm_elementwise_affine": False,
    "positional_embedding_type": "rope",
    "use_middle_indices_grid": True,
    "norm_eps": 1e-6,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "audio_positional_embedding_max_pos": [20],
    "positional_embedding_theta": 10000.0,
    "timestep_scale_multiplier": 1000,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "in_channels": 16,
    "out_channels": 16,
    "audio_in_channels": 8,
    "audio_out_channels": 8,
    "num_layers": 2,
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "audio_cross_attention_dim": 8,
    "apply_gated_attention": True,
    "cross_attention_adaln": True,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "frequencies_precision": "float64",
    "rope_type": "split",
}


def randomize_(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Deterministic, non-trivial values for every parameter (tables and norms included)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * noise)
            else:
                fan_in = p.shape[-1] if p.ndim > 1 else 4
                p.copy_(noise / fan_in**0.5)
    return module.eval().requires_grad_(False)


# The LTX-2.5 architecture flags (bias-free feed-forwards, no prompt AdaLN, keyframe embedding), for
# tests that run on both flag sets.
LTX25_TRANSFORMER_FLAGS: dict[str, Any] = {
    "ff_bias": False,
    "audio_ff_bias": False,
    "use_prompt_adaln_single": False,
    "use_keyframes_abs_pos_embedding": True,
}
FLAG_SETS = {"ltx-2.3": {}, "ltx-2.5": LTX25_TRANSFORMER_FLAGS}


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    """A whole-checkpoint `config` dict (only the transformer section), safe to modify."""
    return {"transformer": copy.deepcopy(TINY_TRANSFORMER)}


@pytest.fixture
def make_model() -> Callable[..., LTXModel]:
    def make(variant: ModelVariant = ModelVariant.AUDIO_VIDEO, seed: int = 0, **overrides: Any) -> LTXModel:
        config = {"transformer": {**copy.deepcopy(TINY_TRANSFORMER), **overrides}}
        return randomize_(configure_transformer(config, variant), seed)

    return make


def _positions(batch: int, tokens: int, axes: int, step: float) -> torch.Tensor:
    start = torch.arange(tokens, dtype=torch.float32) * step
    extent = torch.stack([start, start + step], dim=-1)  # (T, 2)
    return extent[None, None].expand(batch, axes, tokens, 2).clone()


@pytest.fixture
def make_inputs() -> Callable[..., tuple[Modality, Modality]]:
    """(video, audio) Modalities for the tiny config: batch items differ, sigma per item."""

    def make(batch: int = 2, video_tokens: int = 12, audio_tokens: int = 6, seed: int = 1, context_len: int = 5):
        g = torch.Generator().manual_seed(seed)
        sigma = torch.linspace(0.9, 0.3, batch)
        video = Modality(
            latent=torch.randn(batch, video_tokens, 16, generator=g),
            timesteps=sigma[:, None, None].expand(batch, video_tokens, 1).clone(),
            sigma=sigma.clone(),
            positions=_positions(batch, video_tokens, 3, 0.25),
            context=torch.randn(batch, context_len, 16, generator=g),
        )
        audio = Modality(
            latent=torch.randn(batch, audio_tokens, 8, generator=g),
            timesteps=sigma[:, None, None].expand(batch, audio_tokens, 1).clone(),
            sigma=sigma.clone(),
            positions=_positions(batch, audio_tokens, 1, 0.04),
            context=torch.randn(batch, context_len, 8, generator=g),
        )
        return video, audio

    return make


def _assert_close(got: torch.Tensor, want: torch.Tensor, atol: float = 1e-5, rtol: float = 1.3e-6) -> None:
    """Elementwise |got - want| <= atol + rtol |want| (torch.testing's first call imports sympy: ~8 s)."""
    assert got.shape == want.shape, f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    err = (got.double() - want.double()).abs()
    bound = atol + rtol * want.double().abs()
    assert bool((err <= bound).all()), f"max |diff| {float(err.max()):.3e} exceeds atol {atol} + rtol {rtol}"


@pytest.fixture
def assert_close() -> Callable[..., None]:
    return _assert_close


@pytest.fixture
def write_checkpoint(tmp_path) -> Callable[..., Any]:
    """write_checkpoint(name="tiny.safetensors", seed=0, **overrides) -> (path, config dict).

    A released-layout single file (bfloat16 weights under `model.diffusion_model.`, the config in
    its metadata) of a random tiny transformer.
    """
    import json

    from safetensors.torch import save_file

    def write(name: str = "tiny.safetensors", seed: int = 0, **overrides: Any):
        config = {"transformer": {**copy.deepcopy(TINY_TRANSFORMER), **overrides}}
        model = randomize_(configure_transformer(config), seed)
        tensors = {
            f"model.diffusion_model.{k}": v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
        }
        path = tmp_path / name
        save_file(tensors, str(path), metadata={"config": json.dumps(config)})
        return path, config

    return write


@pytest.fixture
def write_lora(tmp_path) -> Callable[..., Any]:
    """write_lora(checkpoint_config, targets, name="lora.safetensors", rank=2, seed=0) -> path.

    `targets` are module names (e.g. "transformer_blocks.0.attn1.to_q"); A/B are random bfloat16.
    """
    from safetensors.torch import save_file

    def write(config: dict[str, Any], targets: list[str], name: str = "lora.safetensors", rank: int = 2, seed: int = 0):
        with torch.device("meta"):
            model = configure_transformer(config)
        g = torch.Generator().manual_seed(seed)
        tensors = {}
        for target in targets:
            out_features, in_features = model.get_submodule(target).weight.shape
            tensors[f"diffusion_model.{target}.lora_A.weight"] = (torch.randn(rank, in_features, generator=g) * 0.3).to(
                torch.bfloat16
            )
            tensors[f"diffusion_model.{target}.lora_B.weight"] = (
                torch.randn(out_features, rank, generator=g) * 0.3
            ).to(torch.bfloat16)
        path = tmp_path / name
        save_file(tensors, str(path))
        return path

    return write
