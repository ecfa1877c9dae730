"""Vocoder variants built from modified configs: layout detection, sample rates, lengths, loading, checks."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from ltx_core.loader import CheckpointError, build_model
from ltx_core.model.audio_vae import (
    VOCODER,
    BandwidthExtensionVocoder,
    HifiGanVocoder,
    MelSTFT,
    vocoder_from_config,
)
from ltx_core.model.audio_vae.anti_alias import DownSample1d, UpSample1d, hann_sinc_upsample, kaiser_sinc_filter


@pytest.mark.parametrize(
    ("overrides", "activation_keys"),
    [
        ({"resblock": "1"}, set()),
        ({"resblock": "AMP1", "activation": "snake"}, {"resblocks.0.acts1.0.act.alpha"}),
        ({"resblock": "AMP1", "activation": "snakebeta"}, {"resblocks.0.acts1.0.act.beta"}),
    ],
)
def test_plain_vocoder_variants(tiny_vocoder_config, randomize, overrides, activation_keys):
    vocoder = randomize(vocoder_from_config(tiny_vocoder_config(**overrides)))
    assert isinstance(vocoder, HifiGanVocoder)
    assert vocoder.output_sample_rate == 24000  # LTX-2 default when the config does not say
    keys = set(vocoder.state_dict())
    assert activation_keys <= keys
    if overrides["resblock"] == "AMP1":
        assert {"act_post.act.beta", "act_post.upsample.filter", "act_post.downsample.lowpass.filter"} <= keys
        assert "resblocks.0.acts1.0.upsample.filter" in keys
    else:
        assert not any("act" in k for k in keys)
    assert ("resblocks.0.acts1.0.act.beta" in keys) == (overrides.get("activation") == "snakebeta")
    mel = torch.randn(2, 2, 3, 64)
    waveform = vocoder(mel)
    # 240 samples per 10 ms mel frame: 24 kHz.
    assert waveform.shape == (2, 2, 3 * 240) and waveform.dtype == torch.float32
    assert waveform.abs().max() <= 1.0


def test_final_activation_options(tiny_vocoder_config, randomize):
    # Same seed, same shapes: the three generators share their weights.
    tanh = randomize(vocoder_from_config(tiny_vocoder_config(use_tanh_at_final=True)))
    clamp = randomize(vocoder_from_config(tiny_vocoder_config(use_tanh_at_final=False)))
    raw = randomize(HifiGanVocoder(replace(tanh.config, apply_final_activation=False)))
    with torch.no_grad():
        for vocoder in (tanh, clamp, raw):
            vocoder.conv_post.weight.mul_(20.0)  # push the output past [-1, 1] so the activation shows
    mel = torch.randn(1, 2, 4, 64, generator=torch.Generator().manual_seed(0))
    pre = raw(mel)
    assert pre.abs().max() > 1.0
    assert torch.allclose(tanh(mel), torch.tanh(pre))
    assert torch.equal(clamp(mel), pre.clamp(-1.0, 1.0))
    no_bias = vocoder_from_config(tiny_vocoder_config(use_bias_at_final=False))
    assert "conv_post.bias" not in no_bias.state_dict() and "conv_post.bias" in tanh.state_dict()


def test_output_rate_from_config(tiny_vocoder_config):
    assert vocoder_from_config(tiny_vocoder_config(output_sampling_rate=22050)).output_sample_rate == 22050


@pytest.mark.slow
def test_bandwidth_extension_vocoder(tiny_vocoder_config, randomize):
    vocoder = randomize(vocoder_from_config(tiny_vocoder_config(bwe=True)))
    assert isinstance(vocoder, BandwidthExtensionVocoder)
    assert (vocoder.input_sample_rate, vocoder.output_sample_rate) == (16000, 48000)
    keys = set(vocoder.state_dict())
    assert {"vocoder.conv_pre.weight", "bwe_generator.conv_pre.weight", "mel_stft.mel_basis"} <= keys
    assert {"mel_stft.stft_fn.forward_basis", "mel_stft.stft_fn.inverse_basis"} <= keys
    assert vocoder.state_dict()["bwe_generator.conv_pre.weight"].shape[1] == 2 * 16  # stereo x bwe num_mels
    mel = torch.randn(1, 2, 3, 64)
    low = vocoder.vocoder(mel)
    assert low.shape == (1, 2, 3 * 160)  # 16 kHz
    high = vocoder(mel)
    assert high.shape == (1, 2, 3 * low.shape[-1]) and high.abs().max() <= 1.0
    # Without a residual the output is the 16 kHz audio upsampled x3.
    with torch.no_grad():
        vocoder.bwe_generator.conv_post.weight.zero_()
    assert torch.allclose(vocoder(mel), hann_sinc_upsample(low, 3).clamp(-1, 1))


def test_bandwidth_extension_pads_to_whole_hops(tiny_vocoder_config, randomize):
    config = tiny_vocoder_config(bwe=True)
    config["vocoder"]["vocoder"]["upsample_rates"] = [8, 5, 3]  # 120 samples per frame: not whole hops of 7
    config["vocoder"]["vocoder"]["upsample_kernel_sizes"] = [16, 11, 7]
    config["vocoder"]["bwe"].update(hop_length=7, upsample_rates=[7, 3], upsample_kernel_sizes=[7, 3])
    vocoder = randomize(vocoder_from_config(config))
    assert vocoder(torch.randn(1, 2, 2, 64)).shape == (1, 2, 2 * 120 * 3)


def test_runs_in_float32_whatever_the_weight_dtype(tiny_vocoder_config, randomize):
    for bwe in (False, True):
        vocoder = randomize(vocoder_from_config(tiny_vocoder_config(bwe=bwe)))
        mel = torch.randn(1, 2, 2, 64)
        low_precision = vocoder.to(torch.bfloat16)
        upcast = randomize(vocoder_from_config(tiny_vocoder_config(bwe=bwe)))
        upcast.load_state_dict({k: v.float() for k, v in low_precision.state_dict().items()})
        got = low_precision(mel.to(torch.bfloat16))
        assert got.dtype == torch.float32
        assert next(low_precision.parameters()).dtype == torch.bfloat16
        assert torch.equal(got, upcast(mel.to(torch.bfloat16).float()))


@pytest.mark.parametrize("bwe", [False, True], ids=["plain", "bwe"])
def test_round_trip_through_a_checkpoint(tiny_vocoder_config, randomize, write_checkpoint, state_under, bwe):
    config = tiny_vocoder_config(bwe=bwe)
    vocoder = randomize(vocoder_from_config(config))
    path = write_checkpoint(config, state_under("vocoder.", vocoder))
    loaded = build_model(VOCODER, path, device="cpu")
    assert type(loaded) is type(vocoder)
    mel = torch.randn(1, 2, 2, 64)
    assert torch.equal(loaded(mel), vocoder(mel))


@pytest.mark.parametrize(
    ("shape", "match"),
    [((1, 1, 5, 64), "stereo log-mel"), ((1, 2, 5, 80), "stereo log-mel"), ((2, 5, 64), "stereo log-mel")],
)
def test_rejects_bad_mels(tiny_vocoder_config, shape, match):
    for bwe in (False, True):
        with pytest.raises(ValueError, match=match):
            vocoder_from_config(tiny_vocoder_config(bwe=bwe))(torch.zeros(shape))


@pytest.mark.parametrize(
    ("bwe", "change", "match"),
    [
        (False, {"resblock": "2"}, "resblock '2'"),
        (False, {"activation": "relu"}, "activation 'relu'"),
        (False, {"stereo": False}, "stereo"),
        (False, {"upsample_kernel_sizes": [16, 12]}, "same length"),
        (True, {"bwe": {"hop_length": 5}}, "hop_length 5"),
        (True, {"bwe": {"output_sampling_rate": 44100}}, "multiple of the input rate"),
        (True, {"bwe": {"n_fft": None}}, "n_fft"),
    ],
)
def test_bad_configs_are_named(tiny_vocoder_config, bwe, change, match):
    config = tiny_vocoder_config(bwe=bwe)
    section = config["vocoder"]
    for key, value in change.items():
        if isinstance(value, dict):
            for k, v in value.items():
                if v is None:
                    section[key].pop(k)
                else:
                    section[key][k] = v
        else:
            section[key] = value
    with pytest.raises(CheckpointError, match=match):
        vocoder_from_config(config)


def test_missing_section_is_reported():
    with pytest.raises(CheckpointError, match="vocoder"):
        vocoder_from_config({"audio_vae": {}})


# -- signal-processing parts --------------------------------------------------------------------------


def test_kaiser_filters_are_unit_gain_low_pass():
    taps = kaiser_sinc_filter(0.25, 0.3, 12)[0, 0].double()
    assert torch.allclose(taps.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(taps, taps.flip(0))  # linear phase
    response = np.abs(np.fft.rfft(taps.numpy(), 512))
    assert response[: int(512 * 0.1)].min() > 0.9 and response[int(512 * 0.4) :].max() < 0.1


def test_anti_aliasing_resamplers_keep_a_low_tone():
    x = torch.sin(2 * math.pi * 0.02 * torch.arange(400.0))[None, None].expand(1, 3, -1)
    up = UpSample1d(2, 12)(x)
    down = DownSample1d(2, 12)(up)
    assert up.shape == (1, 3, 800) and down.shape == (1, 3, 400)
    # The even-length filter centres output n at input position (n - 0.5) / 2; the downsampler undoes it.
    want_up = torch.sin(2 * math.pi * 0.01 * (torch.arange(800.0) - 0.5))
    assert torch.allclose(up[0, 0, 20:-20], want_up[20:-20], atol=0.02)
    assert torch.allclose(down[0, 1, 10:-10], x[0, 1, 10:-10], atol=0.03)


def test_hann_sinc_upsampler_interpolates_a_sine():
    x = torch.sin(2 * math.pi * 0.05 * torch.arange(300.0))[None, None]
    y = hann_sinc_upsample(x, 3)
    assert y.shape == (1, 1, 900)
    want = torch.sin(2 * math.pi * 0.05 / 3 * torch.arange(900.0))
    assert torch.allclose(y[0, 0, 60:-60], want[60:-60], atol=0.01)


def test_causal_mel_stft_matches_framed_fft():
    mel_stft = MelSTFT(n_fft=64, hop_length=16, n_mels=20, sample_rate=16000)
    x = torch.randn(2, 160)
    got = mel_stft(x)
    assert got.shape == (2, 20, 10)
    padded = np.pad(x.double().numpy(), ((0, 0), (48, 0)))  # left only: n_fft - hop
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(64) / 64)
    frames = np.stack([padded[:, i * 16 : i * 16 + 64] * window for i in range(10)], axis=1)
    magnitude = np.abs(np.fft.rfft(frames, axis=-1))  # (2, frames, 33)
    want = np.log(np.maximum(magnitude @ mel_stft.mel_basis.double().numpy().T, 1e-5)).transpose(0, 2, 1)
    assert np.abs(got.double().numpy() - want).max() < 1e-4
    # Causal: the first frames do not see later samples.
    changed = x.clone()
    changed[:, 100:] = 0
    assert torch.equal(mel_stft(changed)[..., :6], got[..., :6])  # frame i ends at sample 16 i + 16
