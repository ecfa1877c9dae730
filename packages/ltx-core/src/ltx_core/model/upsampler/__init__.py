"""Latent upsamplers: spatial x2, rational spatial x1.5 (and 0.75 / 4), temporal x2."""

from ltx_core.model.upsampler.config import LatentUpsamplerConfig
from ltx_core.model.upsampler.model import (
    LatentStatistics,
    LatentUpsampler,
    UpsamplerResBlock,
    upsample_video_latent,
)
from ltx_core.model.upsampler.resampling import (
    RATIONAL_SCALES,
    BlurDownsample,
    FramewiseShuffleUpsampler,
    RationalSpatialResampler,
    VolumeShuffleUpsampler,
    binomial_blur_kernel,
    shuffle_channels_into_axes,
)
from ltx_core.model.upsampler.spec import LATENT_UPSAMPLER, LATENT_UPSAMPLER_KEYS, latent_upsampler_from_config

__all__ = [
    "LATENT_UPSAMPLER",
    "LATENT_UPSAMPLER_KEYS",
    "RATIONAL_SCALES",
    "BlurDownsample",
    "FramewiseShuffleUpsampler",
    "LatentStatistics",
    "LatentUpsampler",
    "LatentUpsamplerConfig",
    "RationalSpatialResampler",
    "UpsamplerResBlock",
    "VolumeShuffleUpsampler",
    "binomial_blur_kernel",
    "latent_upsampler_from_config",
    "shuffle_channels_into_axes",
    "upsample_video_latent",
]
