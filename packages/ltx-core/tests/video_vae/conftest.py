"""Tiny randomly initialised video VAEs built from (modified) config sections."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from ltx_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVAEConfig
from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder

# Same block structure as the released VAE (32x32x8 compression), with few channels.
TINY_VAE: dict[str, Any] = {
    "_class_name": "CausalVideoAutoencoder",
    "dims": 3,
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 8,
    "patch_size": 4,
    "norm_layer": "pixel_norm",
    "latent_log_var": "uniform",
    "spatial_padding_mode": "zeros",
    "timestep_conditioning": False,
    "causal_decoder": False,
    "decoder_base_channels": 4,
    "encoder_blocks": [
        ["res_x", {"num_layers": 1}],
        ["compress_space_res", {"multiplier": 2}],
        ["compress_time_res", {"multiplier": 2}],
        ["compress_all_res", {"multiplier": 2}],
        ["compress_all_res", {"multiplier": 1}],
    ],
    "decoder_blocks": [
        ["res_x", {"num_layers": 1}],
        ["compress_space", {"multiplier": 2}],
        ["res_x", {"num_layers": 1}],
        ["compress_time", {"multiplier": 2}],
        ["res_x", {"num_layers": 1}],
        ["compress_all", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all", {"multiplier": 2}],
        ["res_x", {"num_layers": 1}],
    ],
}


def randomize_(module: nn.Module, seed: int = 0, locality: float = 1.0) -> nn.Module:
    """Fill every weight with seeded noise; `locality` < 1 shrinks the off-centre taps of 3x3x3 kernels.

    A trained VAE is mostly local; shrinking the off-centre taps gives random weights that property,
    so tiled and untiled results can be compared meaningfully.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("timestep_scale_multiplier"):
                p.fill_(1000.0)
                continue
            fan_in = p[0].numel() if p.ndim > 1 else 1
            p.copy_(torch.randn(p.shape, generator=g) / fan_in**0.5 * (1.0 if p.ndim > 1 else 0.1))
            if p.ndim == 5 and p.shape[2] == 3 and locality != 1.0:
                taps = torch.full((3, 3, 3), locality)
                taps[1, 1, 1] = 1.0
                p.mul_(taps)
        for name, b in module.named_buffers():
            if name.endswith("std-of-means"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
            elif name.endswith("mean-of-means"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return module.eval().requires_grad_(False)


@pytest.fixture
def tiny_vae_config() -> dict[str, Any]:
    return copy.deepcopy(TINY_VAE)


@pytest.fixture
def make_vae() -> Callable[..., tuple[VideoEncoder, VideoDecoder]]:
    """`make_vae(seed=0, locality=1.0, **overrides)` -> (encoder, decoder) of a tiny random VAE."""

    def make(seed: int = 0, locality: float = 1.0, **overrides: Any) -> tuple[VideoEncoder, VideoDecoder]:
        section = copy.deepcopy(TINY_VAE)
        section.update(overrides)
        config = VideoVAEConfig.from_checkpoint_config(section)
        encoder = randomize_(VideoEncoder(config), seed, locality)
        decoder = randomize_(VideoDecoder(config), seed + 1, locality)
        # The decoder shares the encoder's statistics, as in a checkpoint.
        decoder.per_channel_statistics.load_state_dict(encoder.per_channel_statistics.state_dict())
        return encoder, decoder

    return make


# -- the LTX-2.5 diffusion decoder ------------------------------------------------------------------
TINY_DIFFUSION = DiffusionDecoderConfig(
    in_channels=8,
    out_channels=3,
    patch_size=2,
    head_dim=16,
    t_emb_dim=16,
    num_inference_steps=2,
    timestep_scale_multiplier=1000.0,
    stage_channels=(32, 16, 16, 16, 16),
    stage_depths=(1, 1, 1, 1, 1),
    stage_kernels=((3, 3, 3),) * 5,
    upsamples=(((1, 2, 2), 2), ((2, 1, 1), 1), ((2, 2, 2), 1), ((2, 2, 2), 1)),
    stage5_kernel=(3, 3, 3),
)


def tiny_diffusion_decoder(seed: int = 0, config: DiffusionDecoderConfig = TINY_DIFFUSION) -> DiffusionVideoDecoder:
    """A tiny LTX-2.5 diffusion decoder in eval mode with non-trivial AdaLN tables."""
    torch.manual_seed(seed)
    decoder = DiffusionVideoDecoder(config)
    with torch.no_grad():
        for block in decoder.diff_blocks:
            block.scale_shift_table.normal_(0, 0.1)
    return decoder.eval()
