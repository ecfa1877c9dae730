"""LTX-2 video VAE: causal 3-D conv encoder/decoder, the LTX-2.5 diffusion decoder, latent statistics,
tiled encode/decode."""

from __future__ import annotations

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "VAEBlock": "ltx_core.model.video_vae.config",
    "VideoVAEConfig": "ltx_core.model.video_vae.config",
    "scale_factors_of": "ltx_core.model.video_vae.config",
    "DECODE_NOISE_SCALE": "ltx_core.model.video_vae.decoder",
    "DEFAULT_DECODE_TIMESTEP": "ltx_core.model.video_vae.decoder",
    "VideoDecoder": "ltx_core.model.video_vae.decoder",
    "to_rgb_frames": "ltx_core.model.video_vae.decoder",
    "DiffusionDecoderConfig": "ltx_core.model.video_vae.diffusion_config",
    "is_diffusion_vae_config": "ltx_core.model.video_vae.diffusion_config",
    "DiffusionVideoDecoder": "ltx_core.model.video_vae.diffusion_decoder",
    "VideoEncoder": "ltx_core.model.video_vae.encoder",
    "PerChannelStatistics": "ltx_core.model.video_vae.layers",
    "DIFFUSION_VIDEO_DECODER": "ltx_core.model.video_vae.spec",
    "VIDEO_DECODER": "ltx_core.model.video_vae.spec",
    "VIDEO_ENCODER": "ltx_core.model.video_vae.spec",
    "VIDEO_LATENT_STATISTICS": "ltx_core.model.video_vae.spec",
    "diffusion_video_decoder_from_config": "ltx_core.model.video_vae.spec",
    "video_decoder_from_config": "ltx_core.model.video_vae.spec",
    "video_decoder_spec": "ltx_core.model.video_vae.spec",
    "video_encoder_from_config": "ltx_core.model.video_vae.spec",
    "video_latent_statistics_from_config": "ltx_core.model.video_vae.spec",
    "AxisTiling": "ltx_core.model.video_vae.tiling_config",
    "TilingConfig": "ltx_core.model.video_vae.tiling_config",
    "VideoTile": "ltx_core.model.video_vae.tiling",
    "decode_tile_layout": "ltx_core.model.video_vae.tiling",
    "encode_tile_layout": "ltx_core.model.video_vae.tiling",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
