"""Parity of the LTX-2.5 audio decode (audio VAE decoder + BWE vocoder from the split audio VAE file)
and of the latent spatial upsampler (with the 2.5 video VAE's statistics) with the reference."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import build_model
from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER, decode_audio
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.model.video_vae.spec import VIDEO_ENCODER

pytestmark = pytest.mark.golden


def test_ltx25_audio_decode_matches_reference(golden_ltx25_fixture, ltx25_files, assert_golden_close):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    decoder = build_model(AUDIO_DECODER, ltx25_files, dtype=torch.float32, device="cpu")
    vocoder = build_model(VOCODER, ltx25_files, dtype=torch.float32, device="cpu")
    assert vocoder.output_sample_rate == fx.params["audio.sampling_rate"]
    with torch.inference_mode():
        waveform = decode_audio(fx["audio.latent"], decoder, vocoder)
    # The fixture stores one item's (channels, samples).
    assert_golden_close(waveform[0], fx["audio.waveform"], name="audio.waveform")


def test_ltx25_spatial_upsampler_matches_reference(
    golden_ltx25_fixture, ltx25_files, ltx25_component_file, assert_golden_close
):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    upsampler = build_model(LATENT_UPSAMPLER, ltx25_component_file("spatial_upsampler"), device="cpu")
    encoder = build_model(VIDEO_ENCODER, ltx25_files, device="cpu")
    with torch.inference_mode():
        got = upsample_video_latent(fx["upsampler.latent"], upsampler, encoder.per_channel_statistics)
    assert_golden_close(got, fx["upsampler.upsampled"], name="upsampler.upsampled")


def test_ltx25_temporal_upsampler_matches_reference(
    golden_ltx25_fixture, golden_ltx25_dir, ltx25_files, golden_lacks, assert_golden_close
):
    """The temporal x2 upsampler file the DFR run used (2F - 1 latent frames), checked on its first round."""
    fx = golden_ltx25_fixture("fx_pipeline_ltx25_more")
    if "dfr.round_1.temporal_upsampled_latent" not in fx:
        golden_lacks("fx_pipeline_ltx25_more's dfr.round_1.temporal_upsampled_latent (a DFR run with a temporal round)")
    upsampler = build_model(
        LATENT_UPSAMPLER, golden_ltx25_dir / fx.params["dfr"]["temporal_upsampler_file"], device="cpu"
    )
    encoder = build_model(VIDEO_ENCODER, ltx25_files, device="cpu")
    latent = fx["dfr.stage_2.video_latent"]
    with torch.inference_mode():
        got = upsample_video_latent(latent, upsampler, encoder.per_channel_statistics)
    assert got.shape[2] == 2 * latent.shape[2] - 1
    assert_golden_close(got, fx["dfr.round_1.temporal_upsampled_latent"], name="temporal_upsampled_latent")
