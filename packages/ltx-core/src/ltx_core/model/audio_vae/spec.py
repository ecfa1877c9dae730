"""Component specs: how `build_model` makes the audio VAE halves and the vocoder out of a checkpoint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltx_core.loader import AUDIO_DECODER_KEYS, AUDIO_ENCODER_KEYS, VOCODER_KEYS, Component, ComponentSpec
from ltx_core.model.audio_vae.audio_vae import AudioDecoder, AudioEncoder
from ltx_core.model.audio_vae.config import AudioVAEConfig
from ltx_core.model.audio_vae.vocoder import vocoder_from_config


def audio_encoder_from_config(config: Mapping[str, Any]) -> AudioEncoder:
    """Configurator: the encoder described by a checkpoint's `config` (its `audio_vae` section)."""
    return AudioEncoder(AudioVAEConfig.from_checkpoint_config(config))


def audio_decoder_from_config(config: Mapping[str, Any]) -> AudioDecoder:
    """Configurator: the decoder described by a checkpoint's `config` (its `audio_vae` section)."""
    return AudioDecoder(AudioVAEConfig.from_checkpoint_config(config))


_KIND = "an LTX-2 / LTX-2.3 single-file checkpoint with audio (audio_vae.* and vocoder.* keys)"

AUDIO_ENCODER = ComponentSpec(
    name="audio encoder",
    ops=AUDIO_ENCODER_KEYS,
    configurator=audio_encoder_from_config,
    config_section="audio_vae",
    expected_kind=_KIND,
    component=Component.AUDIO_VAE,
)

AUDIO_DECODER = ComponentSpec(
    name="audio decoder",
    ops=AUDIO_DECODER_KEYS,
    configurator=audio_decoder_from_config,
    config_section="audio_vae",
    expected_kind=_KIND,
    component=Component.AUDIO_VAE,
)

# Runs in float32 whatever `dtype` build_model is given (the weights are upcast per call).
VOCODER = ComponentSpec(
    name="vocoder",
    ops=VOCODER_KEYS,
    configurator=vocoder_from_config,
    config_section="vocoder",
    expected_kind=_KIND,
    component=Component.AUDIO_VAE,
)
