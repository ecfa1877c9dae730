"""Parity with the reference on the golden fixtures `fx_audio_vae` and `fx_vocoder`."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import build_model, checkpoint_config
from ltx_core.model.audio_vae import (
    VOCODER,
    AudioPreprocessor,
    BandwidthExtensionVocoder,
    HifiGanVocoder,
    decode_audio,
    encode_audio,
)

pytestmark = pytest.mark.golden


def _waveform_cases_present(fx) -> bool:
    stored = "waveform.waveform" in fx
    declared = bool(fx.params.get("waveform_fixture_present", stored))
    # A set that declares the waveform case must carry it: a missing tensor is a broken set, not a skip.
    assert declared == stored, f"params.waveform_fixture_present is {declared} but waveform.waveform stored: {stored}"
    return stored


def test_preprocessor_settings_match_fixture(golden_model_source, golden_fixture):
    fx = golden_fixture("fx_audio_vae")
    pre = AudioPreprocessor.from_config(checkpoint_config(VOCODER, golden_model_source))
    assert (pre.sample_rate, pre.mel_bins, pre.hop_length, pre.n_fft) == (
        fx.params["sample_rate"],
        fx.params["mel_bins"],
        fx.params["hop_length"],
        fx.params["n_fft"],
    )


def test_waveform_to_mel_and_latent(golden_fixture, golden_audio_models, assert_golden_close, golden_lacks):
    fx = golden_fixture("fx_audio_vae")
    if not _waveform_cases_present(fx):
        golden_lacks("fx_audio_vae: a waveform case")
    encoder = golden_audio_models["encoder"]
    pre = AudioPreprocessor.from_config(encoder.config)
    waveform, rate = fx["waveform.waveform"], fx.params["sample_rate"]
    assert_golden_close(pre(waveform, rate), fx["waveform.mel"], name="waveform.mel")
    assert_golden_close(encode_audio(waveform, rate, encoder), fx["waveform.latent"], name="waveform.latent")


def test_encode(golden_fixture, golden_audio_models, assert_golden_close):
    fx = golden_fixture("fx_audio_vae")
    encoder = golden_audio_models["encoder"]
    got = encoder(fx["encode.mel"])
    assert got.shape[2] == encoder.config.latent_frames(fx["encode.mel"].shape[2])
    assert_golden_close(got, fx["encode.latent"], name="encode.latent")


def test_decode(golden_fixture, golden_audio_models, assert_golden_close):
    fx = golden_fixture("fx_audio_vae")
    decoder = golden_audio_models["decoder"]
    got = decoder(fx["decode.latent"])
    assert got.shape[2] == decoder.config.decoded_frames(fx["decode.latent"].shape[2])
    assert_golden_close(got, fx["decode.mel"], name="decode.mel")


def test_decode_audio(golden_fixture, golden_audio_models, assert_golden_close):
    fx = golden_fixture("fx_audio_vae")
    decoder, vocoder = golden_audio_models["decoder"], golden_audio_models["vocoder"]
    waveform = decode_audio(fx["decode.latent"][:1], decoder, vocoder)
    assert waveform.dtype == torch.float32
    if "decode_audio_sampling_rate" in fx.params:
        assert vocoder.output_sample_rate == fx.params["decode_audio_sampling_rate"]
    # The fixture stores the single item with its batch dimension squeezed.
    assert_golden_close(waveform[0], fx["decode_audio.waveform"], name="decode_audio.waveform")


def test_vocoder(golden_fixture, golden_audio_models, assert_golden_close):
    fx = golden_fixture("fx_vocoder")
    vocoder = golden_audio_models["vocoder"]
    with_bwe = fx.params.get("with_bandwidth_extension", "lowrate_waveform" in fx)
    # `lowrate_waveform` exists exactly for the bandwidth-extension vocoder.
    assert ("lowrate_waveform" in fx) == bool(with_bwe)
    assert isinstance(vocoder, BandwidthExtensionVocoder if with_bwe else HifiGanVocoder)
    assert vocoder.output_sample_rate == fx.params["output_sampling_rate"]
    assert_golden_close(vocoder(fx["mel"]), fx["waveform"], name="waveform")
    if "lowrate_waveform" in fx:
        assert vocoder.input_sample_rate == fx.params["input_sampling_rate"]
        assert_golden_close(vocoder.vocoder(fx["mel"]), fx["lowrate_waveform"], name="lowrate_waveform")


@pytest.mark.slow
def test_vocoder_built_in_bfloat16_still_computes_in_float32(golden_model_source, golden_fixture, assert_golden_close):
    fx = golden_fixture("fx_vocoder")
    vocoder = build_model(VOCODER, golden_model_source, dtype=torch.bfloat16, device="cpu")
    assert vocoder(fx["mel"].to(torch.bfloat16)).dtype == torch.float32
    got = vocoder(fx["mel"])
    assert next(vocoder.parameters()).dtype == torch.bfloat16  # the module itself is left as built
    # The golden weights are stored in bfloat16, so upcasting them reproduces the float32 run.
    assert_golden_close(got, fx["waveform"], name="waveform (bf16-built)")
