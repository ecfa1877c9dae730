"""LTX-2 video VAE: causal 3-D conv encoder/decoder, the LTX-2.5 diffusion decoder, latent statistics,
tiled encode/decode."""

from ltx_core.model.video_vae.config import VAEBlock, VideoVAEConfig, scale_factors_of
from ltx_core.model.video_vae.decoder import (
    DECODE_NOISE_SCALE,
    DEFAULT_DECODE_TIMESTEP,
    VideoDecoder,
    to_rgb_frames,
)
from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig, is_diffusion_vae_config
from ltx_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx_core.model.video_vae.encoder import VideoEncoder
from ltx_core.model.video_vae.layers import PerChannelStatistics
from ltx_core.model.video_vae.spec import (
    DIFFUSION_VIDEO_DECODER,
    VIDEO_DECODER,
    VIDEO_ENCODER,
    diffusion_video_decoder_from_config,
    video_decoder_from_config,
    video_decoder_spec,
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
    "DIFFUSION_VIDEO_DECODER",
    "VIDEO_DECODER",
    "VIDEO_ENCODER",
    "AxisTiling",
    "DiffusionDecoderConfig",
    "DiffusionVideoDecoder",
    "PerChannelStatistics",
    "TilingConfig",
    "VAEBlock",
    "VideoDecoder",
    "VideoEncoder",
    "VideoTile",
    "VideoVAEConfig",
    "decode_tile_layout",
    "diffusion_video_decoder_from_config",
    "encode_tile_layout",
    "is_diffusion_vae_config",
    "scale_factors_of",
    "to_rgb_frames",
    "video_decoder_from_config",
    "video_decoder_spec",
    "video_encoder_from_config",
]
