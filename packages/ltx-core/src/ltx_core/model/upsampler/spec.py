"""Building a latent upsampler from an upscaler file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltx_core.loader import UPSAMPLER_KEYS, ComponentSpec
from ltx_core.model.upsampler.config import LatentUpsamplerConfig
from ltx_core.model.upsampler.model import LatentUpsampler


def latent_upsampler_from_config(config: Mapping[str, Any]) -> LatentUpsampler:
    """Configurator: the module described by an upscaler file's flat `config` metadata."""
    return LatentUpsampler(LatentUpsamplerConfig.from_checkpoint_config(config))


# Rational-resampler files also store the blur filter of their decimation step; it is a fixed binomial
# kernel that the module computes itself, so it is not read (files with or without it both load).
LATENT_UPSAMPLER_KEYS = UPSAMPLER_KEYS.dropping(suffix="blur_down.kernel").named("latent_upsampler")

LATENT_UPSAMPLER = ComponentSpec(
    name="latent upsampler",
    ops=LATENT_UPSAMPLER_KEYS,
    configurator=latent_upsampler_from_config,
    config_section=None,
    expected_kind="a latent upscaler file such as ltx-2.3-spatial-upscaler-x2-1.1.safetensors",
)
