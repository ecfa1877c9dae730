"""Building the video VAE encoder and decoder out of an LTX-2 checkpoint file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ltx_core.loader import (
    VIDEO_DECODER_KEYS,
    VIDEO_ENCODER_KEYS,
    VIDEO_LATENT_STATISTICS_KEYS,
    CheckpointError,
    Component,
    ComponentSpec,
)
from ltx_core.model.video_vae.config import VideoVAEConfig
from ltx_core.model.video_vae.decoder import VideoDecoder
from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig, is_diffusion_vae_config
from ltx_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx_core.model.video_vae.encoder import VideoEncoder
from ltx_core.model.video_vae.layers import PerChannelStatistics
from ltx_core.model.video_vae.vae_class import encoder_vae_config


def _vae_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    section = config.get("vae")
    if not isinstance(section, Mapping):
        raise CheckpointError("the checkpoint config has no 'vae' section; expected an LTX-2 single-file checkpoint")
    return section


def _vae_config(config: Mapping[str, Any]) -> VideoVAEConfig:
    return VideoVAEConfig.from_checkpoint_config(_vae_section(config))


def video_encoder_from_config(config: Mapping[str, Any]) -> VideoEncoder:
    """Configurator: the encoder described by a checkpoint's whole `config` metadata (the convolutional
    VAE's, or the convolutional encoder of the LTX-2.5 diffusion VAE)."""
    return VideoEncoder(encoder_vae_config(_vae_section(config)))


def video_latent_statistics_from_config(config: Mapping[str, Any]) -> PerChannelStatistics:
    """Configurator: the per-channel latent statistics the encoder normalises with (what the latent upsamplers
    work through), alone: reading them builds no encoder."""
    return PerChannelStatistics(encoder_vae_config(_vae_section(config)).latent_channels)


def video_decoder_from_config(config: Mapping[str, Any]) -> VideoDecoder:
    """Configurator: the decoder described by a checkpoint's whole `config` metadata."""
    return VideoDecoder(_vae_config(config))


_KIND = "an LTX-2 single-file checkpoint (or a video VAE file) with a 'vae' config section"

VIDEO_ENCODER = ComponentSpec(
    name="video VAE encoder",
    ops=VIDEO_ENCODER_KEYS,
    configurator=video_encoder_from_config,
    config_section="vae",
    expected_kind=_KIND,
    component=Component.VIDEO_VAE,
)

VIDEO_LATENT_STATISTICS = ComponentSpec(
    name="video VAE latent statistics",
    ops=VIDEO_LATENT_STATISTICS_KEYS,
    configurator=video_latent_statistics_from_config,
    config_section="vae",
    expected_kind=_KIND,
    component=Component.VIDEO_VAE,
)

VIDEO_DECODER = ComponentSpec(
    name="video VAE decoder",
    ops=VIDEO_DECODER_KEYS,
    configurator=video_decoder_from_config,
    config_section="vae",
    expected_kind=_KIND,
    component=Component.VIDEO_VAE,
)


def diffusion_video_decoder_from_config(config: Mapping[str, Any]) -> DiffusionVideoDecoder:
    """Configurator: the LTX-2.5 diffusion decoder (`vae._class_name` CausalDiffusionVAE)."""
    section = config.get("vae")
    if not isinstance(section, Mapping):
        raise CheckpointError("the checkpoint config has no 'vae' section; expected an LTX-2.5 video VAE file")
    return DiffusionVideoDecoder(DiffusionDecoderConfig.from_checkpoint_config(section))


# Static residual gates the file stores beside the weights they scale (per output channel).
_GATED_WEIGHTS = {
    ".gate_msa": (".attn.proj.weight", ".attn.proj.bias"),
    ".gate_mlp": (".mlp.w_down.weight", ".mlp.w_down.bias"),
    ".gate_ctx": (".context_proj.weight", ".context_proj.bias"),
}


def fold_static_gates(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Fold every `<block>.gate_*` into its Linear (W <- g W row-wise, b <- g b) and drop the gate.

    The product is taken in float32 and rounded to the weight's stored dtype, as the reference loader
    does, so a bf16 file gives the same folded bf16 weights.
    """
    out = dict(state_dict)
    for key, gate in state_dict.items():
        suffix = next((s for s in _GATED_WEIGHTS if key.endswith(s)), None)
        if suffix is None:
            continue
        block = key[: -len(suffix)]
        targets = [block + leaf for leaf in _GATED_WEIGHTS[suffix] if block + leaf in state_dict]
        if not targets:
            raise CheckpointError(f"static gate {key!r} has none of the weights it scales: {_GATED_WEIGHTS[suffix]}")
        g = gate.float()
        for target in targets:
            value = state_dict[target]
            if value.shape[0] != g.shape[0]:
                raise CheckpointError(f"static gate {key!r} has {g.shape[0]} channels, {target!r} has {value.shape[0]}")
            scale = g.view(-1, *([1] * (value.ndim - 1)))
            out[target] = (value.float() * scale).to(value.dtype)
        del out[key]
    return out


DIFFUSION_VIDEO_DECODER_KEYS = (
    VIDEO_DECODER_KEYS.named("diffusion_video_decoder")
    # The bundled preview head (`coarse_*`) is not part of the decoder.
    .dropping(prefix="vae.decoder.coarse_")
    .dropping(prefix="decoder.coarse_")
)

DIFFUSION_VIDEO_DECODER = ComponentSpec(
    name="diffusion video VAE decoder",
    ops=DIFFUSION_VIDEO_DECODER_KEYS,
    configurator=diffusion_video_decoder_from_config,
    config_section="vae",
    expected_kind="an LTX-2.5 video VAE file (vae._class_name CausalDiffusionVAE)",
    rewrite=fold_static_gates,
    component=Component.VIDEO_VAE,
)


def video_decoder_spec(config: Mapping[str, Any]) -> ComponentSpec:
    """The decoder spec a checkpoint's `config` metadata calls for: diffusion (LTX-2.5
    CausalDiffusionVAE) or convolutional (LTX-2 / 2.3, and the 2.5 conv VAE file)."""
    return DIFFUSION_VIDEO_DECODER if is_diffusion_vae_config(config) else VIDEO_DECODER
