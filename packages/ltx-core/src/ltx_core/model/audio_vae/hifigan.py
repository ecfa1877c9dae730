"""The HiFi-GAN / BigVGAN generator: stereo log-mel (B, 2, T, mel_bins) -> stereo waveform (B, 2, hop * T).

The two channels' mel bins are stacked channel-major into 2 * mel_bins input features. Then conv_pre ->
per stage: transposed-convolution upsampling by the stage rate (width halves), then the mean of several
residual blocks with different kernel sizes -> final activation -> conv_post to 2 channels -> optional
tanh or clamp. This is the whole LTX-2 vocoder, and each of the two generators of the LTX-2.3 one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ltx_core.model.audio_vae.anti_alias import AntiAliasedActivation, SnakeBeta, make_snake
from ltx_core.model.audio_vae.precision import call_with_float32_weights, check_mel, weights_are_float32
from ltx_core.model.audio_vae.vocoder_config import GeneratorConfig

# HiFi-GAN's leaky ReLU slope inside the network (the final activation uses PyTorch's default 0.01).
LEAKY_SLOPE = 0.1


def _dilated_conv(channels: int, kernel_size: int, dilation: int) -> nn.Conv1d:
    return nn.Conv1d(channels, channels, kernel_size, dilation=dilation, padding=dilation * (kernel_size - 1) // 2)


class HifiGanResBlock(nn.Module):
    """Resblock "1": three residual units of leaky ReLU -> dilated conv -> leaky ReLU -> conv."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(_dilated_conv(channels, kernel_size, d) for d in dilations)
        self.convs2 = nn.ModuleList(_dilated_conv(channels, kernel_size, 1) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv1, conv2 in zip(self.convs1, self.convs2):
            h = conv1(F.leaky_relu(x, LEAKY_SLOPE))
            x = x + conv2(F.leaky_relu(h, LEAKY_SLOPE))
        return x


class AmpResBlock(nn.Module):
    """Resblock "AMP1" (BigVGAN): as resblock "1" with anti-aliased Snake activations instead of leaky ReLU."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...], activation: str) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(_dilated_conv(channels, kernel_size, d) for d in dilations)
        self.convs2 = nn.ModuleList(_dilated_conv(channels, kernel_size, 1) for _ in dilations)
        self.acts1 = nn.ModuleList(AntiAliasedActivation(make_snake(activation, channels)) for _ in dilations)
        self.acts2 = nn.ModuleList(AntiAliasedActivation(make_snake(activation, channels)) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv1, conv2, act1, act2 in zip(self.convs1, self.convs2, self.acts1, self.acts2):
            x = x + conv2(act2(conv1(act1(x))))
        return x


class HifiGanVocoder(nn.Module):
    """Stereo log-mel (B, 2, T, mel_bins) -> float32 waveform (B, 2, hop * T) at `output_sample_rate`.

    Always computes in float32 (see `precision`), whatever dtype the weights were loaded in.
    """

    def __init__(self, config: GeneratorConfig) -> None:
        super().__init__()
        self.config = config
        self.output_sample_rate = config.output_sample_rate
        self.mel_bins = config.mel_bins
        self.conv_pre = nn.Conv1d(2 * config.mel_bins, config.upsample_initial_channel, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(
                config.channels(i - 1), config.channels(i), kernel, stride=rate, padding=(kernel - rate) // 2
            )
            for i, (rate, kernel) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes))
        )
        # Flat list, stage-major: resblocks[stage * n_kernels + j].
        self.resblocks = nn.ModuleList()
        for stage in range(len(config.upsample_rates)):
            width = config.channels(stage)
            for kernel, dilations in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes):
                block = (
                    AmpResBlock(width, kernel, dilations, config.activation)
                    if config.is_amp
                    else HifiGanResBlock(width, kernel, dilations)
                )
                self.resblocks.append(block)
        final_width = config.channels(len(config.upsample_rates) - 1)
        # The checkpoint format uses SnakeBeta here for every AMP generator, whatever `activation` says.
        self.act_post = AntiAliasedActivation(SnakeBeta(final_width)) if config.is_amp else nn.LeakyReLU()
        self.conv_post = nn.Conv1d(final_width, 2, 7, padding=3, bias=config.use_bias_at_final)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        check_mel("vocoder", mel, self.mel_bins)
        if not weights_are_float32(self):
            return call_with_float32_weights(self, mel)
        # (B, 2, T, M) -> (B, 2 * M, T): feature s * M + m for stereo channel s, mel bin m.
        x = mel.float().transpose(2, 3).flatten(1, 2)
        return self.generate(x)

    def generate(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 2 * mel_bins, T) features -> (B, 2, hop * T) waveform."""
        cfg = self.config
        n_kernels = len(cfg.resblock_kernel_sizes)
        x = self.conv_pre(x)
        for stage, upsample in enumerate(self.ups):
            if not cfg.is_amp:
                x = F.leaky_relu(x, LEAKY_SLOPE)
            x = upsample(x)
            blocks = self.resblocks[stage * n_kernels : (stage + 1) * n_kernels]
            x = torch.stack([block(x) for block in blocks]).mean(dim=0)
        x = self.conv_post(self.act_post(x))
        if not cfg.apply_final_activation:
            return x
        return torch.tanh(x) if cfg.use_tanh_at_final else x.clamp(-1.0, 1.0)
