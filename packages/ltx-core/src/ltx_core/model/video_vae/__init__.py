"""LTX-2 video VAE: causal 3-D conv encoder/decoder, latent statistics, tiled encode/decode."""

from ltx_core.model.video_vae.config import VAEBlock, VideoVAEConfig, scale_factors_of
from ltx_core.model.video_vae.decoder import (
    DECODE_NOISE_SCALE,
    DEFAULT_DECODE_TIMESTEP,
    VideoDecoder,
    to_rgb_frames,
)
from ltx_core.model.video_vae.encoder import VideoEncoder
from ltx_core.model.video_vae.layers import PerChannelStatistics
from ltx_core.model.video_vae.spec import (
    VIDEO_DECODER,
    VIDEO_ENCODER,
    video_decoder_from_config,
    video_encoder_from_config,
)
from ltx_core.model.video_vae.tiling import (
    AxisTiling,
    TilingConfig,
    VideoTile,
    decode_tile_layout,
    encode_tile_layout,
)

__all__ = [
    "DECODE_NOISE_SCALE",
    "DEFAULT_DECODE_TIMESTEP",
    "VIDEO_DECODER",
    "VIDEO_ENCODER",
    "AxisTiling",
    "PerChannelStatistics",
    "TilingConfig",
    "VAEBlock",
    "VideoDecoder",
    "VideoEncoder",
    "VideoTile",
    "VideoVAEConfig",
    "decode_tile_layout",
    "encode_tile_layout",
    "scale_factors_of",
    "to_rgb_frames",
    "video_decoder_from_config",
    "video_encoder_from_config",
]
