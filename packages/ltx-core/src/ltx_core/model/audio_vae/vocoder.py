"""The two vocoder layouts of the LTX-2 family, chosen by the checkpoint config.

- LTX-2: one `HifiGanVocoder` (log-mel -> 24 kHz stereo), keys `vocoder.*` -> module root.
- LTX-2.3: `BandwidthExtensionVocoder`: `vocoder` (log-mel -> 16 kHz), then a log-mel of that audio
  (`mel_stft`, a causal STFT whose bases are stored in the file) drives `bwe_generator`, whose output is
  a residual added to the 16 kHz audio upsampled by a Hann-windowed sinc; the sum is clamped to [-1, 1].

Both take a stereo log-mel (B, 2, T, 64) and return a float32 waveform (B, 2, N) at `output_sample_rate`,
computing in float32 whatever the weights' dtype (see `precision`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ltx_core.model.audio_vae.anti_alias import hann_sinc_upsample
from ltx_core.model.audio_vae.hifigan import HifiGanVocoder
from ltx_core.model.audio_vae.mel import LOG_MEL_FLOOR, slaney_mel_filterbank
from ltx_core.model.audio_vae.precision import call_with_float32_weights, check_mel, weights_are_float32
from ltx_core.model.audio_vae.vocoder_config import BandwidthExtensionConfig, vocoder_config_from_checkpoint


class CausalSTFT(nn.Module):
    """Magnitude STFT as a strided convolution with stored bases; frames see only past and present samples.

    `forward_basis` (2F, 1, n_fft) holds the real parts of bins 0..n_fft/2, then the imaginary parts,
    each multiplied by a periodic Hann window. `inverse_basis` is stored in the files but not used here.
    """

    def __init__(self, n_fft: int, hop_length: int) -> None:
        super().__init__()
        self.n_fft = n_fft
        self.hop_length = hop_length
        n_freqs = n_fft // 2 + 1
        # Initial values only (checkpoints carry the bases), computed on the CPU even on the meta device.
        cpu = torch.device("cpu")
        angle = 2 * math.pi * torch.arange(n_freqs, device=cpu)[:, None] * torch.arange(n_fft, device=cpu) / n_fft
        window = torch.hann_window(n_fft, periodic=True, device=cpu)
        basis = torch.cat([torch.cos(angle), -torch.sin(angle)]) * window
        self.register_buffer("forward_basis", basis[:, None, :].to(torch.get_default_device()))
        self.register_buffer("inverse_basis", torch.zeros(2 * n_freqs, 1, n_fft))

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        """(N, samples) -> magnitudes (N, n_fft / 2 + 1, samples / hop) with left-only padding."""
        x = F.pad(waveform[:, None], (self.n_fft - self.hop_length, 0))
        spectrum = F.conv1d(x, self.forward_basis.to(x.dtype), stride=self.hop_length)
        real, imag = spectrum.chunk(2, dim=1)
        return torch.sqrt(real**2 + imag**2)


class MelSTFT(nn.Module):
    """Causal log-mel: log(clamp(mel_basis @ |STFT|, 1e-5)) with the stored filterbank `mel_basis`."""

    def __init__(self, n_fft: int, hop_length: int, n_mels: int, sample_rate: int) -> None:
        super().__init__()
        self.stft_fn = CausalSTFT(n_fft, hop_length)
        filters = slaney_mel_filterbank(sample_rate, n_fft, n_mels, device="cpu")
        self.register_buffer("mel_basis", filters.to(torch.get_default_device()))

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        """(N, samples) -> (N, n_mels, frames)."""
        magnitude = self.stft_fn(waveform)
        mel = torch.matmul(self.mel_basis.to(magnitude.dtype), magnitude)
        return torch.log(mel.clamp(min=LOG_MEL_FLOOR))


class BandwidthExtensionVocoder(nn.Module):
    """Stereo log-mel (B, 2, T, 64) -> float32 waveform (B, 2, N) at `output_sample_rate` (LTX-2.3)."""

    def __init__(self, config: BandwidthExtensionConfig) -> None:
        super().__init__()
        self.config = config
        self.input_sample_rate = config.input_sample_rate
        self.output_sample_rate = config.output_sample_rate
        self.mel_bins = config.base.mel_bins
        self.vocoder = HifiGanVocoder(config.base)
        self.bwe_generator = HifiGanVocoder(config.bwe)
        self.mel_stft = MelSTFT(config.n_fft, config.hop_length, config.bwe.mel_bins, config.input_sample_rate)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        check_mel("vocoder", mel, self.mel_bins)
        if not weights_are_float32(self):
            return call_with_float32_weights(self, mel)
        low_rate = self.vocoder(mel)
        return self.extend(low_rate)

    def extend(self, low_rate: torch.Tensor) -> torch.Tensor:
        """(B, 2, n) audio at the input rate -> (B, 2, n * ratio) at the output rate."""
        cfg = self.config
        batch, channels, samples = low_rate.shape
        out_samples = samples * cfg.ratio
        # Whole hops only, so the STFT frames tile the (zero-extended) signal exactly.
        x = F.pad(low_rate, (0, -samples % cfg.hop_length))
        mel = self.mel_stft(x.reshape(batch * channels, -1))  # (B * 2, n_mels, frames)
        mel = mel.reshape(batch, channels, *mel.shape[1:]).transpose(2, 3)  # (B, 2, frames, n_mels)
        residual = self.bwe_generator(mel)
        skip = hann_sinc_upsample(x, cfg.ratio)
        return (residual + skip).clamp(-1.0, 1.0)[..., :out_samples]


# Either vocoder: call it on a stereo log-mel, read `output_sample_rate`.
Vocoder = HifiGanVocoder | BandwidthExtensionVocoder


def vocoder_from_config(config: Mapping[str, Any]) -> Vocoder:
    """Configurator: the vocoder described by a checkpoint's `config` (the `bwe` entry selects LTX-2.3's)."""
    parsed = vocoder_config_from_checkpoint(config)
    if isinstance(parsed, BandwidthExtensionConfig):
        return BandwidthExtensionVocoder(parsed)
    return HifiGanVocoder(parsed)
