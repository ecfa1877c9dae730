"""Waveform -> log-mel front end of the audio VAE, and the band-limited resampler it uses.

log-mel = log(clamp(M |STFT(x)|, 1e-5)) with a periodic Hann window of n_fft samples, hop `hop_length`,
centred frames (reflect padding of n_fft / 2 on both ends) and M the Slaney-scale, Slaney-normalised
triangular filterbank over [f_min, f_max]. Frames: 1 + samples // hop_length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ltx_core.model.audio_vae.config import AudioVAEConfig

LOG_MEL_FLOOR = 1e-5

# Slaney's auditory scale (as in the Auditory Toolbox): linear below 1 kHz at 3 mels per 200 Hz, then
# logarithmic with 27 mels per factor 6.4 in frequency.
_LINEAR_HZ_PER_MEL = 200.0 / 3.0
_LOG_START_HZ = 1000.0
_LOG_START_MEL = _LOG_START_HZ / _LINEAR_HZ_PER_MEL
_NEPERS_PER_LOG_MEL = math.log(6.4) / 27.0


def hz_to_slaney_mel(hz: float) -> float:
    if hz < _LOG_START_HZ:
        return hz / _LINEAR_HZ_PER_MEL
    return _LOG_START_MEL + math.log(hz / _LOG_START_HZ) / _NEPERS_PER_LOG_MEL


def slaney_mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    linear = mel * _LINEAR_HZ_PER_MEL
    logarithmic = _LOG_START_HZ * torch.exp(_NEPERS_PER_LOG_MEL * (mel - _LOG_START_MEL))
    return torch.where(mel >= _LOG_START_MEL, logarithmic, linear)


def slaney_mel_filterbank(
    sample_rate: int,
    n_fft: int,
    n_mels: int,
    f_min: float = 0.0,
    f_max: float | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """(n_mels, n_fft // 2 + 1) matrix of triangular filters equally spaced on the Slaney mel scale.

    Filter i rises from edge i to edge i+1 and falls to edge i+2 (n_mels + 2 edges); each is scaled by
    2 / (width in Hz) so every filter has the same area ("slaney" normalisation). Evaluated in `dtype`
    (on the CPU, then moved to `device`): in float32 it equals the reference's filterbank bit for bit,
    which keeps log-mels of near-silent bins identical too.
    """
    f_max = sample_rate / 2 if f_max is None else f_max
    if not 0 <= f_min < f_max <= sample_rate / 2:
        raise ValueError(f"mel filterbank needs 0 <= f_min < f_max <= sample_rate / 2, got {f_min}, {f_max}")
    cpu = torch.device("cpu")
    bins_hz = torch.linspace(0, sample_rate // 2, n_fft // 2 + 1, dtype=dtype, device=cpu)
    mel_edges = torch.linspace(hz_to_slaney_mel(f_min), hz_to_slaney_mel(f_max), n_mels + 2, dtype=dtype, device=cpu)
    edges_hz = slaney_mel_to_hz(mel_edges)
    lower, centre, upper = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (bins_hz[None] - lower) / (centre - lower)
    falling = (upper - bins_hz[None]) / (upper - centre)
    filters = torch.minimum(rising, falling).clamp(min=0.0)
    filters = filters * (2.0 / (upper - lower))
    return filters.to(device=device)


def _resampling_kernel(orig: int, new: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, int]:
    """Polyphase kernels (new, 1, taps) of a Hann-windowed sinc low-pass, and the half-width in input samples.

    The cut-off is 0.99 of the lower Nyquist frequency and the sinc is windowed to 6 zero crossings,
    the usual defaults of audio resamplers (and those of the reference preprocessing, whose float32
    evaluation order is kept here so the resampled audio matches it to rounding).
    """
    zero_crossings, rolloff = 6, 0.99
    cutoff = min(orig, new) * rolloff  # in units of the reduced rates
    half_width = math.ceil(zero_crossings * orig / cutoff)
    # Output phase p of every block of `new` outputs sits at input position -p * orig / new.
    taps = torch.arange(-half_width, half_width + orig, dtype=dtype, device=device) / orig
    phases = torch.arange(0, -new, -1, dtype=dtype, device=device)[:, None] / new
    t = ((phases + taps[None]) * cutoff).clamp(-zero_crossings, zero_crossings)
    window = torch.cos(t * math.pi / zero_crossings / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.ones_like(t), torch.sin(t) / t)
    kernel = sinc * (window * (cutoff / orig))
    return kernel[:, None, :], half_width


def resample_waveform(waveform: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """Band-limited resampling along the last axis; output length ceil(N * new_rate / orig_rate)."""
    for name, rate in (("orig_rate", orig_rate), ("new_rate", new_rate)):
        if not isinstance(rate, int) or isinstance(rate, bool) or rate < 1:
            raise ValueError(f"resampling {name} must be a positive integer (Hz), got {rate!r}")
    if orig_rate == new_rate:
        return waveform
    step = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // step, new_rate // step
    kernel, half_width = _resampling_kernel(orig, new, waveform.dtype, waveform.device)
    lead = waveform.shape[:-1]
    length = waveform.shape[-1]
    flat = F.pad(waveform.reshape(-1, 1, length), (half_width, half_width + orig))
    # One output per phase for every `orig` input samples, interleaved back into time order.
    phased = F.conv1d(flat, kernel, stride=orig)
    out = phased.transpose(1, 2).reshape(phased.shape[0], -1)
    out_length = -(-new * length // orig)
    return out[:, :out_length].reshape(*lead, out_length)


@dataclass(frozen=True)
class AudioPreprocessor:
    """Stereo waveform -> the audio VAE's log-mel input (B, 2, frames, mel_bins).

    Mono input is duplicated to both channels; input at another sample rate is resampled first.
    Computes in float32 (float64 input stays float64).
    """

    sample_rate: int = 16_000
    n_fft: int = 1024
    hop_length: int = 160
    mel_bins: int = 64
    f_min: float = 0.0
    f_max: float | None = None

    def __post_init__(self) -> None:
        for name in ("sample_rate", "n_fft", "hop_length", "mel_bins"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"AudioPreprocessor {name} must be a positive integer, got {value!r}")

    @classmethod
    def from_config(cls, config: AudioVAEConfig | dict[str, Any]) -> AudioPreprocessor:
        """From an `AudioVAEConfig` or a checkpoint's `config` metadata (its `audio_vae` section)."""
        cfg = config if isinstance(config, AudioVAEConfig) else AudioVAEConfig.from_checkpoint_config(config)
        return cls(sample_rate=cfg.sample_rate, n_fft=cfg.n_fft, hop_length=cfg.hop_length, mel_bins=cfg.mel_bins)

    @property
    def min_samples(self) -> int:
        """Shortest waveform (at `sample_rate`) the centred STFT accepts: reflect padding needs n_fft / 2 + 1."""
        return self.n_fft // 2 + 1

    def frames(self, samples: int) -> int:
        return 1 + samples // self.hop_length

    def __call__(self, waveform: torch.Tensor, sample_rate: int) -> torch.Tensor:
        """waveform (B, 1 or 2, N) at `sample_rate` Hz -> log-mel (B, 2, 1 + N' // hop, mel_bins)."""
        if waveform.dim() != 3 or waveform.shape[1] not in (1, 2):
            raise ValueError(
                f"waveform must be (batch, channels, samples) with 1 (mono) or 2 (stereo) channels, "
                f"got shape {tuple(waveform.shape)}"
            )
        if not waveform.is_floating_point():
            raise ValueError(f"waveform must be a floating tensor, got {waveform.dtype}")
        if not isinstance(sample_rate, int) or isinstance(sample_rate, bool) or sample_rate < 1:
            raise ValueError(f"sample_rate must be a positive integer (Hz), got {sample_rate!r}")
        samples = waveform.shape[-1]
        resampled = -(-samples * self.sample_rate // sample_rate)
        if resampled < self.min_samples:
            raise ValueError(
                f"audio too short: {samples} samples at {sample_rate} Hz ({resampled} at {self.sample_rate} Hz); "
                f"the log-mel needs at least {self.min_samples} samples at {self.sample_rate} Hz "
                f"({self.min_samples / self.sample_rate * 1000:.1f} ms)"
            )
        dtype = torch.float64 if waveform.dtype == torch.float64 else torch.float32
        x = resample_waveform(waveform.to(dtype), sample_rate, self.sample_rate)
        if x.shape[1] == 1:
            x = x.expand(-1, 2, -1)
        return self.log_mel(x)

    def log_mel(self, waveform: torch.Tensor) -> torch.Tensor:
        """(..., N) at `sample_rate` -> (..., frames, mel_bins); no resampling or channel handling."""
        lead, samples = waveform.shape[:-1], waveform.shape[-1]
        window = torch.hann_window(self.n_fft, periodic=True, dtype=waveform.dtype, device=waveform.device)
        spectrum = torch.stft(
            waveform.reshape(-1, samples),
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            win_length=self.n_fft,
            window=window,
            center=True,
            pad_mode="reflect",
            return_complex=True,
        ).abs()  # (N, n_fft // 2 + 1, frames)
        filters = slaney_mel_filterbank(
            self.sample_rate,
            self.n_fft,
            self.mel_bins,
            self.f_min,
            self.f_max,
            dtype=waveform.dtype,
            device=waveform.device,
        )
        mel = torch.matmul(spectrum.transpose(1, 2), filters.T)  # (N, frames, mel_bins)
        log_mel = torch.log(mel.clamp(min=LOG_MEL_FLOOR))
        return log_mel.reshape(*lead, *log_mel.shape[1:])
