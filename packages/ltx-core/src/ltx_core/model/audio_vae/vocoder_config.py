"""Vocoder configuration, read from the `vocoder` section of a checkpoint's `config` metadata.

Two layouts exist. LTX-2 files hold one flat generator config (a HiFi-GAN / BigVGAN generator that
writes 24 kHz audio from the 16 kHz-hop mel). LTX-2.3 files nest it as `vocoder` (mel -> 16 kHz) and
add `bwe` (the bandwidth-extension generator and its STFT settings, output e.g. 48 kHz). The presence
of `bwe` selects the second layout.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltx_core.loader.errors import CheckpointError

RESBLOCK_TYPES = ("1", "AMP1")
ACTIVATIONS = ("snake", "snakebeta")


@dataclass(frozen=True)
class GeneratorConfig:
    """One mel -> waveform generator. Defaults are those of the LTX-2 vocoder.

    `resblock` "1" is the HiFi-GAN residual block (leaky ReLU), "AMP1" the BigVGAN one (anti-aliased
    Snake/SnakeBeta activations). The final activation, when applied, is tanh or a clamp to [-1, 1].
    """

    resblock: str = "1"
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    upsample_rates: tuple[int, ...] = (6, 5, 2, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (16, 15, 8, 4, 4)
    upsample_initial_channel: int = 1024
    activation: str = "snake"
    use_tanh_at_final: bool = True
    use_bias_at_final: bool = True
    apply_final_activation: bool = True
    mel_bins: int = 64
    output_sample_rate: int = 24_000

    def __post_init__(self) -> None:
        if self.resblock not in RESBLOCK_TYPES:
            raise ValueError(f"vocoder resblock {self.resblock!r} is not supported; accepted: {RESBLOCK_TYPES}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"vocoder activation {self.activation!r} is not supported; accepted: {ACTIVATIONS}")
        if not self.upsample_rates or len(self.upsample_rates) != len(self.upsample_kernel_sizes):
            raise ValueError(
                f"vocoder upsample_rates {list(self.upsample_rates)} and upsample_kernel_sizes "
                f"{list(self.upsample_kernel_sizes)} must be non-empty lists of the same length"
            )
        if len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes) or not self.resblock_kernel_sizes:
            raise ValueError(
                f"vocoder resblock_kernel_sizes {list(self.resblock_kernel_sizes)} and resblock_dilation_sizes "
                f"{[list(d) for d in self.resblock_dilation_sizes]} must be non-empty lists of the same length"
            )
        if any(not d for d in self.resblock_dilation_sizes):
            raise ValueError(
                f"vocoder resblock_dilation_sizes must not hold empty lists, got {self.resblock_dilation_sizes}"
            )
        if any(k % 2 == 0 for k in self.resblock_kernel_sizes):
            raise ValueError(f"vocoder resblock_kernel_sizes must be odd, got {list(self.resblock_kernel_sizes)}")
        if any(k < r for r, k in zip(self.upsample_rates, self.upsample_kernel_sizes)):
            raise ValueError(
                "vocoder upsample_kernel_sizes must be >= their upsample_rates, got "
                f"rates {list(self.upsample_rates)}, kernels {list(self.upsample_kernel_sizes)}"
            )
        if self.upsample_initial_channel % (2 ** len(self.upsample_rates)):
            raise ValueError(
                f"vocoder upsample_initial_channel {self.upsample_initial_channel} must be divisible by "
                f"2 ** {len(self.upsample_rates)} (the width halves at every upsampling stage)"
            )
        if self.mel_bins < 1 or self.output_sample_rate < 1:
            raise ValueError(
                "vocoder mel_bins and output_sample_rate must be positive, got "
                f"{self.mel_bins}, {self.output_sample_rate}"
            )

    @property
    def is_amp(self) -> bool:
        return self.resblock == "AMP1"

    @property
    def hop(self) -> int:
        """Waveform samples per mel frame."""
        return math.prod(self.upsample_rates)

    def channels(self, stage: int) -> int:
        """Width after upsampling stage `stage` (stage -1: after conv_pre)."""
        return self.upsample_initial_channel // (2 ** (stage + 1))

    @classmethod
    def from_section(
        cls, section: Mapping[str, Any], *, output_sample_rate: int | None = None, apply_final_activation: bool = True
    ) -> GeneratorConfig:
        d = cls()
        stereo = section.get("stereo", True)
        if stereo is not True:
            raise ValueError(f"only stereo vocoders are supported (the released ones all are), got stereo={stereo!r}")
        return cls(
            resblock=str(section.get("resblock", d.resblock)),
            resblock_kernel_sizes=_ints(section.get("resblock_kernel_sizes", d.resblock_kernel_sizes)),
            resblock_dilation_sizes=tuple(
                _ints(x) for x in section.get("resblock_dilation_sizes", d.resblock_dilation_sizes)
            ),
            upsample_rates=_ints(section.get("upsample_rates", d.upsample_rates)),
            upsample_kernel_sizes=_ints(section.get("upsample_kernel_sizes", d.upsample_kernel_sizes)),
            upsample_initial_channel=int(section.get("upsample_initial_channel", d.upsample_initial_channel)),
            activation=str(section.get("activation", d.activation)),
            use_tanh_at_final=bool(section.get("use_tanh_at_final", d.use_tanh_at_final)),
            use_bias_at_final=bool(section.get("use_bias_at_final", d.use_bias_at_final)),
            apply_final_activation=apply_final_activation,
            mel_bins=int(section.get("num_mels", d.mel_bins)),
            output_sample_rate=int(
                output_sample_rate if output_sample_rate is not None else section.get("output_sampling_rate", 24_000)
            ),
        )


@dataclass(frozen=True)
class BandwidthExtensionConfig:
    """LTX-2.3 vocoder: `base` writes audio at `input_sample_rate`; `bwe` adds the band up to `output_sample_rate`.

    The BWE generator reads a log-mel of the base output (causal STFT, `n_fft` window, `hop_length` hop,
    `bwe.mel_bins` filters); its `hop` must equal hop_length * output_sample_rate / input_sample_rate so
    its output lines up with the sinc-upsampled base output it is added to.
    """

    base: GeneratorConfig
    bwe: GeneratorConfig
    input_sample_rate: int = 16_000
    output_sample_rate: int = 48_000
    hop_length: int = 80
    n_fft: int = 512

    def __post_init__(self) -> None:
        if self.output_sample_rate % self.input_sample_rate:
            raise ValueError(
                f"bandwidth extension needs an output rate that is a multiple of the input rate, got "
                f"{self.output_sample_rate} / {self.input_sample_rate}"
            )
        if not 1 <= self.hop_length <= self.n_fft:
            raise ValueError(f"bandwidth extension needs 1 <= hop_length <= n_fft, got {self.hop_length}, {self.n_fft}")
        if self.bwe.hop != self.hop_length * self.ratio:
            raise ValueError(
                f"bandwidth-extension generator upsamples by {self.bwe.hop} (product of upsample_rates "
                f"{list(self.bwe.upsample_rates)}), but hop_length {self.hop_length} x rate ratio {self.ratio} "
                f"= {self.hop_length * self.ratio} is needed"
            )

    @property
    def ratio(self) -> int:
        return self.output_sample_rate // self.input_sample_rate

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> BandwidthExtensionConfig:
        bwe = section["bwe"]
        base_section = section.get("vocoder", {})
        if not isinstance(bwe, Mapping) or not isinstance(base_section, Mapping):
            raise ValueError("vocoder config 'vocoder' and 'bwe' entries must be JSON objects")
        for key in ("input_sampling_rate", "output_sampling_rate", "hop_length", "n_fft", "num_mels"):
            if key not in bwe:
                raise ValueError(f"vocoder config 'bwe' lacks {key!r}")
        input_rate, output_rate = int(bwe["input_sampling_rate"]), int(bwe["output_sampling_rate"])
        return cls(
            base=GeneratorConfig.from_section(base_section, output_sample_rate=input_rate),
            bwe=GeneratorConfig.from_section(
                bwe,
                output_sample_rate=output_rate,
                apply_final_activation=bool(bwe.get("apply_final_activation", False)),
            ),
            input_sample_rate=input_rate,
            output_sample_rate=output_rate,
            hop_length=int(bwe["hop_length"]),
            n_fft=int(bwe["n_fft"]),
        )


def vocoder_config_from_checkpoint(config: Mapping[str, Any]) -> GeneratorConfig | BandwidthExtensionConfig:
    """Parse the whole `config` (or the `vocoder` section): the LTX-2.3 layout when it has a `bwe` entry."""
    if not isinstance(config, Mapping):
        raise CheckpointError(f"checkpoint config must be a JSON object, got {type(config).__name__}")
    # Accept the section itself too: it is the one mapping that holds `bwe` or generator entries directly.
    section = config if "bwe" in config or "upsample_rates" in config else config.get("vocoder")
    if not isinstance(section, Mapping):
        raise CheckpointError("checkpoint config has no 'vocoder' section (a JSON object)")
    try:
        if "bwe" in section:
            return BandwidthExtensionConfig.from_section(section)
        return GeneratorConfig.from_section(section)
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"invalid vocoder config: {exc}") from exc


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)
