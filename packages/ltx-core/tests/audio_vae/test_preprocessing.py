"""The waveform -> log-mel front end: filterbank, STFT, resampling, channel handling and input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ltx_core.loader import CheckpointError
from ltx_core.model.audio_vae import AudioPreprocessor, AudioVAEConfig, resample_waveform, slaney_mel_filterbank


def _sine(freq: float, rate: int, seconds: float, amplitude: float = 0.5) -> torch.Tensor:
    t = torch.arange(round(rate * seconds), dtype=torch.float64) / rate
    return (amplitude * torch.sin(2 * math.pi * freq * t)).float()


def _dominant_frequency(x: torch.Tensor, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x.double().numpy() * np.hanning(x.shape[-1])))
    return float(np.argmax(spectrum)) * rate / x.shape[-1]


def test_filterbank_shape_and_triangles():
    fb = slaney_mel_filterbank(16000, 1024, 64)
    assert fb.shape == (64, 513) and fb.dtype == torch.float32
    assert (fb >= 0).all()
    peaks = fb.argmax(dim=1)
    assert (peaks[1:] >= peaks[:-1]).all(), "filters must be ordered by centre frequency"
    # A triangle spans from the previous centre to the next one, so it never overlaps its second neighbour.
    assert (fb[:-2] * fb[2:]).max() == 0
    # The centres follow the Slaney scale: linear (66.7 Hz per mel) below 1 kHz, up to 8 kHz.
    bin_hz = 8000 / 512
    top_mel = 15 + math.log(8) * 27 / math.log(6.4)
    first_centre_hz = top_mel / 65 * 200 / 3
    assert abs(float(peaks[0]) * bin_hz - first_centre_hz) <= bin_hz
    assert float(peaks[-1]) * bin_hz > 7000


def test_filterbank_slaney_normalisation_gives_unit_area():
    # Each triangle is scaled to height 2 / width, i.e. area 1 in Hz; wide filters sample it well.
    fb = slaney_mel_filterbank(16000, 1024, 64).double()
    bin_hz = 8000 / 512
    areas = fb.sum(dim=1) * bin_hz
    assert torch.allclose(areas[-20:], torch.ones(20, dtype=torch.float64), atol=0.02)


def test_filterbank_rejects_bad_range():
    with pytest.raises(ValueError, match="f_max"):
        slaney_mel_filterbank(16000, 1024, 64, f_max=9000)


def test_log_mel_matches_an_independent_numpy_stft():
    torch.manual_seed(0)
    pre = AudioPreprocessor()
    x = torch.randn(1, 2, 4000) * 0.1
    got = pre(x, 16000)
    assert got.shape == (1, 2, pre.frames(4000), 64)
    signal = np.pad(x[0, 0].double().numpy(), (512, 512), mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(1024) / 1024)  # periodic Hann
    frames = np.stack([signal[i * 160 : i * 160 + 1024] * window for i in range(got.shape[2])])
    magnitude = np.abs(np.fft.rfft(frames, axis=1))
    want = np.log(np.maximum(magnitude @ slaney_mel_filterbank(16000, 1024, 64).double().numpy().T, 1e-5))
    assert np.abs(got[0, 0].double().numpy() - want).max() < 1e-4


def test_log_mel_floor_for_silence():
    mel = AudioPreprocessor()(torch.zeros(1, 2, 1600), 16000)
    assert torch.allclose(mel, torch.full_like(mel, math.log(1e-5)))


def test_mono_is_duplicated_to_stereo():
    torch.manual_seed(1)
    pre = AudioPreprocessor()
    mono = torch.randn(2, 1, 3200)
    mel = pre(mono, 16000)
    assert mel.shape == (2, 2, 21, 64)
    assert torch.equal(mel[:, 0], mel[:, 1])
    assert torch.equal(mel, pre(mono.expand(-1, 2, -1).contiguous(), 16000))


@pytest.mark.parametrize("orig_rate", [48000, 44100, 22050, 8000])
def test_resampling_keeps_the_frequency(orig_rate):
    sine = _sine(440.0, orig_rate, 0.5)
    out = resample_waveform(sine[None, None], orig_rate, 16000)[0, 0]
    assert out.shape[-1] == math.ceil(sine.shape[-1] * 16000 / orig_rate)
    assert abs(_dominant_frequency(out, 16000) - 440.0) <= 16000 / out.shape[-1]
    # Away from the ends the resampled sine is the same sine sampled at 16 kHz.
    want = _sine(440.0, 16000, out.shape[-1] / 16000)[: out.shape[-1]]
    assert torch.allclose(out[200:-200], want[200:-200], atol=5e-3)


def test_resampling_removes_content_above_the_new_nyquist():
    tone = _sine(7000.0, 48000, 0.25)  # above 4 kHz, the Nyquist frequency of 8 kHz audio
    out = resample_waveform(tone[None], 48000, 8000)
    assert out[0, 100:-100].abs().max() < 0.02


def test_preprocessor_resamples_other_rates():
    pre = AudioPreprocessor()
    at_16k = pre(_sine(1000.0, 16000, 0.5)[None, None], 16000)
    at_48k = pre(_sine(1000.0, 48000, 0.5)[None, None], 48000)
    assert at_48k.shape == at_16k.shape
    peak = at_16k[0, 0, 10].argmax()
    assert at_48k[0, 0, 10].argmax() == peak
    assert torch.allclose(at_48k[0, :, 5:-5, peak], at_16k[0, :, 5:-5, peak], atol=1e-2)


def test_same_rate_is_identity():
    x = torch.randn(1, 2, 100)
    assert resample_waveform(x, 16000, 16000) is x


@pytest.mark.parametrize(
    ("shape", "match"),
    [((1, 3, 4000), "1 \\(mono\\) or 2 \\(stereo\\) channels"), ((2, 4000), "batch, channels, samples")],
)
def test_rejects_bad_channel_layouts(shape, match):
    with pytest.raises(ValueError, match=match):
        AudioPreprocessor()(torch.zeros(shape), 16000)


def test_rejects_too_short_audio_naming_the_minimum():
    pre = AudioPreprocessor()
    with pytest.raises(ValueError, match="too short.*at least 513 samples"):
        pre(torch.zeros(1, 2, 500), 16000)
    with pytest.raises(ValueError, match="1000 samples at 48000 Hz"):
        pre(torch.zeros(1, 2, 1000), 48000)  # 334 samples once at 16 kHz
    assert pre(torch.zeros(1, 2, 513), 16000).shape[2] == 4


@pytest.mark.parametrize("rate", [0, -16000, 16000.5, True])
def test_rejects_bad_sample_rates(rate):
    with pytest.raises(ValueError, match="sample_rate"):
        AudioPreprocessor()(torch.zeros(1, 2, 2000), rate)


def test_rejects_integer_waveforms():
    with pytest.raises(ValueError, match="floating"):
        AudioPreprocessor()(torch.zeros(1, 2, 2000, dtype=torch.int16), 16000)


def test_from_config_reads_the_front_end(tiny_audio_vae_config):
    config = tiny_audio_vae_config()
    config["audio_vae"]["preprocessing"]["stft"]["filter_length"] = 512
    pre = AudioPreprocessor.from_config(config)
    assert (pre.sample_rate, pre.n_fft, pre.hop_length, pre.mel_bins) == (16000, 512, 160, 64)
    assert AudioPreprocessor.from_config(AudioVAEConfig()) == AudioPreprocessor()
    with pytest.raises(CheckpointError, match="audio_vae"):
        AudioPreprocessor.from_config({"vocoder": {}})
