"""Building the video VAE encoder and decoder out of an LTX-2 checkpoint file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltx_core.loader import VIDEO_DECODER_KEYS, VIDEO_ENCODER_KEYS, CheckpointError, Component, ComponentSpec
from ltx_core.model.video_vae.config import VideoVAEConfig
from ltx_core.model.video_vae.decoder import VideoDecoder
from ltx_core.model.video_vae.encoder import VideoEncoder
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

VIDEO_DECODER = ComponentSpec(
    name="video VAE decoder",
    ops=VIDEO_DECODER_KEYS,
    configurator=video_decoder_from_config,
    config_section="vae",
    expected_kind=_KIND,
    component=Component.VIDEO_VAE,
)
