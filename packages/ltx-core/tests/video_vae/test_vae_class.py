"""Reading the video VAE class and the encoder architecture of both file generations."""

from __future__ import annotations

import pytest

from ltx_core.loader import CheckpointError
from ltx_core.model.video_vae.vae_class import encoder_vae_config, is_diffusion_vae, video_scale_factors

BLOCKS = [
    ["res_x", {"num_layers": 1}],
    ["compress_all_res", {"multiplier": 2}],
    ["compress_space_res", {"multiplier": 1}],
]


def test_diffusion_vae_encoder_is_read_from_its_encoder_object():
    vae = {
        "_class_name": "CausalDiffusionVAE",
        "latent_channels": 16,
        "encoder": {
            "in_channels": 3,
            "out_channels": 16,
            "patch_size": 2,
            "blocks": BLOCKS,
            "spatial_padding_mode": "zeros",
        },
        "decoder": {"patch_size": 2},
    }
    assert is_diffusion_vae(vae)
    config = encoder_vae_config(vae)
    assert config.latent_channels == 16 and config.patch_size == 2 and config.decoder_blocks == ()
    scale = video_scale_factors(vae)
    assert (scale.time, scale.height, scale.width) == (2, 8, 8)


def test_conv_vae_and_unknown_classes():
    conv = {"encoder_blocks": BLOCKS, "decoder_blocks": [], "patch_size": 4}
    assert not is_diffusion_vae(conv)
    assert video_scale_factors(conv).height == 16
    with pytest.raises(CheckpointError, match="'Other'.*accepted"):
        is_diffusion_vae({"_class_name": "Other"})
    with pytest.raises(CheckpointError, match="'encoder' object"):
        encoder_vae_config({"_class_name": "CausalDiffusionVAE"})
