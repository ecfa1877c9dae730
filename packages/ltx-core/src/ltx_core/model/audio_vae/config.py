"""The audio VAE's configuration, read from the `audio_vae` section of a checkpoint's `config` metadata.

The section nests the architecture under `model.params.ddconfig` and the mel front end under
`preprocessing`. Entries the file does not carry take the defaults of the released checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ltx_core.loader.errors import CheckpointError

NORM_TYPES = ("pixel", "group")
# "height" makes the time axis (dim 2 of a (B, C, time, mel) tensor) causal, which is what the released
# checkpoints use; the other values are kept for older audio VAEs of the same family.
CAUSALITY_AXES = ("height", "width", "width-compatibility", "none")
ATTENTION_TYPES = ("vanilla", "none")
GROUP_NORM_GROUPS = 32


@dataclass(frozen=True)
class AudioVAEConfig:
    """Architecture of the mel-spectrogram VAE and the mel front end it was trained with.

    `attn_resolutions` is compared against a nominal resolution that starts at `resolution` and halves
    per level (the convention of the checkpoints), so e.g. {256} adds attention to the first level only.
    `downsample_time` appears in released configs but does not change the architecture: every level
    but the last halves both time and mel axes.
    """

    ch: int = 128
    ch_mult: tuple[int, ...] = (1, 2, 4)
    num_res_blocks: int = 2
    attn_resolutions: frozenset[int] = field(default_factory=lambda: frozenset({8, 16, 32}))
    resolution: int = 256
    z_channels: int = 8
    double_z: bool = True
    in_channels: int = 2
    out_ch: int = 2
    mel_bins: int = 64
    mid_block_add_attention: bool = True
    attn_type: str = "vanilla"
    norm_type: str = "pixel"
    causality_axis: str = "height"
    resamp_with_conv: bool = True
    # Mel front end (preprocessing section).
    sample_rate: int = 16_000
    hop_length: int = 160
    n_fft: int = 1024

    def __post_init__(self) -> None:
        for name in ("ch", "num_res_blocks", "resolution", "z_channels", "in_channels", "out_ch", "mel_bins"):
            value = getattr(self, name)
            lowest = 0 if name == "num_res_blocks" else 1
            if not _is_int(value) or value < lowest:
                raise ValueError(f"audio VAE {name} must be an integer >= {lowest}, got {value!r}")
        if not self.ch_mult or not all(_is_int(m) and m >= 1 for m in self.ch_mult):
            raise ValueError(f"audio VAE ch_mult must be a non-empty list of positive integers, got {self.ch_mult!r}")
        if self.norm_type not in NORM_TYPES:
            raise ValueError(f"audio VAE norm_type {self.norm_type!r} is not supported; accepted: {NORM_TYPES}")
        if self.causality_axis not in CAUSALITY_AXES:
            raise ValueError(
                f"audio VAE causality_axis {self.causality_axis!r} is not supported; accepted: {CAUSALITY_AXES}"
            )
        if self.attn_type not in ATTENTION_TYPES:
            raise ValueError(f"audio VAE attn_type {self.attn_type!r} is not supported; accepted: {ATTENTION_TYPES}")
        if self.norm_type == "group":
            if self.is_causal:
                raise ValueError("audio VAE norm_type 'group' mixes time steps, so it needs causality_axis 'none'")
            bad = [c for c in self.level_channels if c % GROUP_NORM_GROUPS]
            if bad:
                raise ValueError(
                    f"audio VAE group norm needs channel counts divisible by {GROUP_NORM_GROUPS}, got {bad}"
                )
        if not self.resamp_with_conv and self.is_causal:
            raise ValueError("audio VAE resamp_with_conv=false (average pooling) needs causality_axis 'none'")
        if self.mel_bins % self.downsample_factor:
            raise ValueError(
                f"audio VAE mel_bins ({self.mel_bins}) must be divisible by the downsampling factor "
                f"{self.downsample_factor} of its {len(self.ch_mult)} levels"
            )
        for name in ("sample_rate", "hop_length", "n_fft"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"audio VAE {name} must be a positive integer, got {value!r}")

    # -- derived sizes ----------------------------------------------------------------------------
    @property
    def num_levels(self) -> int:
        return len(self.ch_mult)

    @property
    def level_channels(self) -> tuple[int, ...]:
        return tuple(self.ch * m for m in self.ch_mult)

    @property
    def downsample_factor(self) -> int:
        """How many mel frames (and mel bins) one latent cell covers: 2 per level but the last."""
        return 2 ** (self.num_levels - 1)

    @property
    def latent_mel_bins(self) -> int:
        return self.mel_bins // self.downsample_factor

    @property
    def latent_features(self) -> int:
        """Width of the patchified latent (channels x latent mel bins) that the statistics normalise."""
        return self.z_channels * self.latent_mel_bins

    @property
    def is_causal(self) -> bool:
        return self.causality_axis != "none"

    @property
    def latents_per_second(self) -> float:
        return self.sample_rate / self.hop_length / self.downsample_factor

    def level_resolution(self, level: int) -> int:
        """Nominal resolution of a level, the value `attn_resolutions` refers to."""
        return self.resolution // (2**level)

    def decoded_frames(self, latent_frames: int) -> int:
        """Mel frames the decoder returns for `latent_frames` latent steps (4T - 3 for the causal VAE)."""
        frames = latent_frames * self.downsample_factor
        if self.is_causal:
            frames = max(frames - (self.downsample_factor - 1), 1)
        return frames

    def latent_frames(self, mel_frames: int) -> int:
        """Latent steps the encoder returns for `mel_frames` mel frames."""
        frames = mel_frames
        for _ in range(self.num_levels - 1):
            # Causal in time: two frames of left padding keep the first frame; otherwise one right pad.
            frames = (frames - 1) // 2 + 1 if self.causality_axis == "height" else frames // 2
        return frames

    @classmethod
    def from_checkpoint_config(cls, config: Mapping[str, Any]) -> AudioVAEConfig:
        """Parse the file's whole `config` (or its `audio_vae` section alone)."""
        section = config.get("audio_vae", config) if isinstance(config, Mapping) else None
        if not isinstance(section, Mapping):
            raise CheckpointError("checkpoint config has no 'audio_vae' section (a JSON object)")
        params = _mapping(_mapping(section.get("model")).get("params"))
        dd = _mapping(params.get("ddconfig"))
        if not dd:
            raise CheckpointError("checkpoint config 'audio_vae' has no model.params.ddconfig section")
        preprocessing = _mapping(section.get("preprocessing"))
        stft = _mapping(preprocessing.get("stft"))
        mel_bins = (
            dd.get("mel_bins")
            or _mapping(preprocessing.get("mel")).get("n_mel_channels")
            or _mapping(section.get("variables")).get("mel_bins")
            or cls.mel_bins
        )
        sample_rate = (
            params.get("sampling_rate") or _mapping(preprocessing.get("audio")).get("sampling_rate") or cls.sample_rate
        )
        causality = dd.get("causality_axis", cls.causality_axis)
        defaults = cls()
        try:
            return cls(
                ch=dd.get("ch", defaults.ch),
                ch_mult=tuple(dd.get("ch_mult", defaults.ch_mult)),
                num_res_blocks=dd.get("num_res_blocks", defaults.num_res_blocks),
                attn_resolutions=frozenset(dd.get("attn_resolutions", defaults.attn_resolutions)),
                resolution=dd.get("resolution", defaults.resolution),
                z_channels=dd.get("z_channels", defaults.z_channels),
                double_z=bool(dd.get("double_z", defaults.double_z)),
                in_channels=dd.get("in_channels", defaults.in_channels),
                out_ch=dd.get("out_ch", defaults.out_ch),
                mel_bins=mel_bins,
                mid_block_add_attention=bool(dd.get("mid_block_add_attention", defaults.mid_block_add_attention)),
                attn_type=dd.get("attn_type", defaults.attn_type),
                norm_type=dd.get("norm_type", defaults.norm_type),
                causality_axis="none" if causality is None else causality,
                resamp_with_conv=bool(dd.get("resamp_with_conv", defaults.resamp_with_conv)),
                sample_rate=sample_rate,
                hop_length=stft.get("hop_length", defaults.hop_length),
                n_fft=stft.get("filter_length", defaults.n_fft),
            )
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"invalid audio_vae config: {exc}") from exc


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
