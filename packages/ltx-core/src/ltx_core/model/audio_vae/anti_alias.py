"""Anti-aliased periodic activations of the BigVGAN-style vocoder, and the sinc upsampler of the BWE skip path.

A Snake activation x + sin^2(a x) / b creates harmonics above the Nyquist frequency; running it at twice
the sample rate between a low-pass upsampler and a low-pass downsampler (Kaiser-windowed sinc filters,
12 taps) keeps them from folding back. The filters are stored in the checkpoints as persistent buffers
(in bfloat16 there); the values computed here are only the initial ones for models built without a file.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> torch.Tensor:
    """(1, 1, kernel_size) low-pass FIR: sinc at `cutoff` (fraction of the sample rate) under a Kaiser window.

    The Kaiser beta follows Kaiser's empirical formula for the attenuation implied by the transition
    band `half_width`; the taps are normalised to unit DC gain.
    """
    half = kernel_size // 2
    attenuation = 2.285 * (half - 1) * math.pi * (4 * half_width) + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    # Computed on the CPU even while a model is being built on the meta device (meta `arange` is slow
    # to set up, and the values are wanted when no checkpoint overwrites them).
    window = torch.kaiser_window(kernel_size, periodic=False, beta=beta, device="cpu")
    # Taps sit at half-integer offsets for even lengths so the filter is centred between two samples.
    if kernel_size % 2 == 0:
        offsets = torch.arange(-half, half, device="cpu") + 0.5
    else:
        offsets = torch.arange(kernel_size, device="cpu") - half
    taps = 2 * cutoff * window * torch.sinc(2 * cutoff * offsets)
    return (taps / taps.sum()).view(1, 1, kernel_size).to(torch.get_default_device())


class LowPassFilter1d(nn.Module):
    """Depthwise low-pass filtering with replicate padding, optionally decimating by `stride`."""

    def __init__(self, cutoff: float, half_width: float, stride: int = 1, kernel_size: int = 12) -> None:
        super().__init__()
        self.stride = stride
        self.padding = (kernel_size // 2 - (1 - kernel_size % 2), kernel_size // 2)
        self.register_buffer("filter", kaiser_sinc_filter(cutoff, half_width, kernel_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, self.padding, mode="replicate")
        return F.conv1d(x, self.filter.to(x.dtype).expand(channels, -1, -1), stride=self.stride, groups=channels)


class DownSample1d(nn.Module):
    """Low-pass at the new Nyquist frequency, then keep every `ratio`-th sample."""

    def __init__(self, ratio: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        self.lowpass = LowPassFilter1d(0.5 / ratio, 0.6 / ratio, stride=ratio, kernel_size=kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lowpass(x)


class UpSample1d(nn.Module):
    """Zero-stuffing by `ratio` and Kaiser-sinc interpolation (a strided transposed depthwise convolution).

    Output length is exactly `ratio` times the input length; the ends are extended by replication first.
    """

    def __init__(self, ratio: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        self.ratio = ratio
        self.pad = kernel_size // ratio - 1
        self.crop_left = self.pad * ratio + (kernel_size - ratio) // 2
        self.crop_right = self.pad * ratio + (kernel_size - ratio + 1) // 2
        self.register_buffer("filter", kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, kernel_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        weight = self.filter.to(x.dtype).expand(channels, -1, -1)
        # The gain `ratio` restores the amplitude lost to the inserted zeros.
        x = self.ratio * F.conv_transpose1d(x, weight, stride=self.ratio, groups=channels)
        return x[..., self.crop_left : x.shape[-1] - self.crop_right]


class Snake(nn.Module):
    """x + sin^2(a x) / a per channel, with a = exp(alpha) (log-scale parameter)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha.exp()[None, :, None]
        return x + torch.sin(x * a).pow(2) * (1.0 / (a + 1e-9))


class SnakeBeta(nn.Module):
    """x + sin^2(a x) / b per channel, with separate frequency a = exp(alpha) and magnitude b = exp(beta)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha.exp()[None, :, None]
        b = self.beta.exp()[None, :, None]
        return x + torch.sin(x * a).pow(2) * (1.0 / (b + 1e-9))


def make_snake(kind: str, channels: int) -> nn.Module:
    return SnakeBeta(channels) if kind == "snakebeta" else Snake(channels)


class AntiAliasedActivation(nn.Module):
    """upsample x2 -> activation -> downsample x2 (keys `upsample.filter`, `act.*`, `downsample.lowpass.filter`)."""

    def __init__(self, activation: nn.Module) -> None:
        super().__init__()
        self.upsample = UpSample1d(2, 12)
        self.act = activation
        self.downsample = DownSample1d(2, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(self.act(self.upsample(x)))


def hann_sinc_upsample(x: torch.Tensor, ratio: int) -> torch.Tensor:
    """Upsample (B, C, N) by an integer `ratio` to (B, C, ratio * N) with a Hann-windowed sinc.

    The same low-pass as `resample_waveform` (6 zero crossings, cut-off 0.99 of the input Nyquist
    frequency), written as a transposed convolution; used by the bandwidth-extension skip path. The
    filter is computed here rather than stored: checkpoints do not carry it.
    """
    zero_crossings, rolloff = 6, 0.99
    width = math.ceil(zero_crossings / rolloff)
    taps = 2 * width * ratio + 1
    t = (torch.arange(taps, dtype=torch.float32, device=x.device) / ratio - width) * rolloff
    window = torch.cos(t.clamp(-zero_crossings, zero_crossings) * math.pi / zero_crossings / 2) ** 2
    kernel = (torch.sinc(t) * window * rolloff / ratio).to(x.dtype)
    channels = x.shape[1]
    x = F.pad(x, (width, width), mode="replicate")
    y = ratio * F.conv_transpose1d(x, kernel.view(1, 1, -1).expand(channels, -1, -1), stride=ratio, groups=channels)
    # Drop the filter's ramp-in/out and the replicated margins: ratio * N samples remain.
    left, right = 2 * width * ratio, taps - ratio
    return y[..., left : y.shape[-1] - right]
