"""Parity of the LTX-2.5 video VAE encoder (the convolutional encoder of the `CausalDiffusionVAE`
file) with the reference, built from the split video VAE file through `ModelFiles`."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import build_model, checkpoint_config
from ltx_core.model.video_vae.spec import VIDEO_ENCODER
from ltx_core.model.video_vae.vae_class import video_scale_factors

pytestmark = pytest.mark.golden
# The diffusers-folder component of `ltx25_model_source`: the video VAE folder its encoder is read from.
DIFFUSERS_COMPONENTS = ("vae",)


def test_ltx25_video_encode_matches_reference(golden_ltx25_fixture, ltx25_model_source, assert_golden_close):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    encoder = build_model(VIDEO_ENCODER, ltx25_model_source, dtype=torch.float32, device="cpu")
    video = fx["vae.encode.video"]
    with torch.inference_mode():
        latent = encoder(video)
    assert_golden_close(latent, fx["vae.encode.latent"], name="vae.encode.latent")
    # The compression factors read from the file account for the shapes the reference produced.
    scale = video_scale_factors(checkpoint_config(VIDEO_ENCODER, ltx25_model_source)["vae"])
    f, h, w = video.shape[-3:]
    assert tuple(latent.shape[-3:]) == ((f - 1) // scale.time + 1, h // scale.height, w // scale.width)
