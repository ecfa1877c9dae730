"""Which video VAE a file holds (`config.vae._class_name`), and the encoder architecture of each.

LTX-2 / LTX-2.3 files hold the convolutional `CausalVideoAutoencoder` (flat section with
`encoder_blocks` / `decoder_blocks`). LTX-2.5 files hold `CausalDiffusionVAE`: the same kind of
convolutional encoder, described in an `encoder` sub-object (`blocks`, `patch_size`, ...), and a
diffusion decoder described in `decoder`. The compression factors come from the encoder's blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltx_core.loader.errors import CheckpointError
from ltx_core.model.video_vae.config import CONV_VAE_CLASS_NAME, VideoVAEConfig
from ltx_core.types import SpatioTemporalScaleFactors

DIFFUSION_VAE_CLASS_NAME = "CausalDiffusionVAE"
VAE_CLASS_NAMES = (CONV_VAE_CLASS_NAME, DIFFUSION_VAE_CLASS_NAME)

# Encoder fields of the diffusion VAE's `encoder` object that the flat conv section names the same.
_SHARED_ENCODER_FIELDS = ("dims", "in_channels", "patch_size", "norm_layer", "latent_log_var", "spatial_padding_mode")


def vae_class_name(vae: Mapping[str, Any]) -> str:
    """The VAE class a `vae` config section describes (absent: the LTX-2 convolutional VAE)."""
    name = vae.get("_class_name", CONV_VAE_CLASS_NAME)
    if name not in VAE_CLASS_NAMES:
        raise CheckpointError(f"vae _class_name {name!r} is not supported; accepted: {list(VAE_CLASS_NAMES)}")
    return str(name)


def is_diffusion_vae(vae: Mapping[str, Any]) -> bool:
    return vae_class_name(vae) == DIFFUSION_VAE_CLASS_NAME


def encoder_vae_config(vae: Mapping[str, Any]) -> VideoVAEConfig:
    """The encoder architecture of either VAE class, as a `VideoVAEConfig` (decoder blocks empty for
    the diffusion VAE, whose decoder is not convolutional)."""
    if not is_diffusion_vae(vae):
        return VideoVAEConfig.from_checkpoint_config(vae)
    encoder = vae.get("encoder")
    if not isinstance(encoder, Mapping) or not isinstance(encoder.get("blocks"), list):
        raise CheckpointError(f"the {DIFFUSION_VAE_CLASS_NAME} config has no 'encoder' object with a 'blocks' list")
    flat: dict[str, Any] = {k: encoder[k] for k in _SHARED_ENCODER_FIELDS if k in encoder}
    flat["_class_name"] = CONV_VAE_CLASS_NAME
    flat["encoder_blocks"] = encoder["blocks"]
    flat["latent_channels"] = int(vae.get("latent_channels", encoder.get("out_channels", 128)))
    return VideoVAEConfig.from_checkpoint_config(flat)


def video_scale_factors(vae: Mapping[str, Any]) -> SpatioTemporalScaleFactors:
    """Pixels (frames) per latent cell, read from the file's encoder (not assumed 32 x 32 x 8)."""
    return encoder_vae_config(vae).encoder_scale
