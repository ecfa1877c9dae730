"""The latent upsampler's configuration, read from the flat `config` metadata of an upscaler file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx_core.loader.errors import CheckpointError
from ltx_core.model.upsampler.resampling import RATIONAL_SCALES

CLASS_NAME = "LatentUpsampler"
# GroupNorm in every stage uses this many groups, so the working width must be a multiple of it.
NORM_GROUPS = 32
# Section names of the single-file LTX checkpoint; seeing one means the wrong file was passed.
_SINGLE_FILE_SECTIONS = ("transformer", "vae", "audio_vae", "vocoder")


@dataclass(frozen=True)
class LatentUpsamplerConfig:
    """Architecture of a latent upsampler. Defaults are those of the released upscalers."""

    in_channels: int = 128
    mid_channels: int = 512
    num_blocks_per_stage: int = 4
    dims: int = 3
    spatial_upsample: bool = True
    temporal_upsample: bool = False
    spatial_scale: float = 2.0
    rational_resampler: bool = False

    def __post_init__(self) -> None:
        for name in ("in_channels", "mid_channels"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"upsampler {name} must be a positive integer, got {value!r}")
        if not _is_int(self.num_blocks_per_stage) or self.num_blocks_per_stage < 0:
            raise ValueError(
                f"upsampler num_blocks_per_stage must be a non-negative integer, got {self.num_blocks_per_stage!r}"
            )
        if self.mid_channels % NORM_GROUPS:
            raise ValueError(
                f"upsampler mid_channels must be a multiple of {NORM_GROUPS} (GroupNorm), got {self.mid_channels}"
            )
        if self.dims not in (2, 3):
            raise ValueError(f"upsampler dims must be 2 or 3, got {self.dims!r}")
        for name in ("spatial_upsample", "temporal_upsample", "rational_resampler"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"upsampler {name} must be true or false, got {getattr(self, name)!r}")
        if not (self.spatial_upsample or self.temporal_upsample):
            raise ValueError("upsampler config enables neither spatial_upsample nor temporal_upsample")
        if not isinstance(self.spatial_scale, (int, float)) or isinstance(self.spatial_scale, bool):
            raise ValueError(f"upsampler spatial_scale must be a number, got {self.spatial_scale!r}")
        if self.spatial_upsample:
            self._check_spatial_scale()
        if self.dims == 2 and (self.temporal_upsample or self.rational_resampler):
            raise ValueError(
                "upsampler dims=2 (per-frame 2-D convolutions) supports only the plain spatial x2 upsampler, got "
                f"temporal_upsample={self.temporal_upsample}, rational_resampler={self.rational_resampler}"
            )

    def _check_spatial_scale(self) -> None:
        scale = float(self.spatial_scale)
        if self.rational_resampler:
            if self.temporal_factor > 1:
                raise ValueError("upsampler rational_resampler cannot be combined with temporal_upsample")
            if scale not in RATIONAL_SCALES:
                raise ValueError(
                    f"upsampler spatial_scale {self.spatial_scale!r} is not supported by the rational resampler; "
                    f"accepted: {sorted(RATIONAL_SCALES)}"
                )
        elif scale != 2.0:
            raise ValueError(
                f"upsampler spatial_scale {self.spatial_scale!r} needs rational_resampler=true; "
                "without it only 2.0 is accepted"
            )

    @property
    def temporal_factor(self) -> int:
        return 2 if self.temporal_upsample else 1

    @property
    def spatial_factor(self) -> float:
        return float(self.spatial_scale) if self.spatial_upsample else 1.0

    @classmethod
    def from_checkpoint_config(cls, config: Mapping[str, Any]) -> LatentUpsamplerConfig:
        """Parse an upscaler file's flat `config`; entries it does not carry take the released defaults."""
        if not isinstance(config, Mapping):
            raise CheckpointError(f"latent upsampler config must be a JSON object, got {type(config).__name__}")
        sections = sorted(k for k, v in config.items() if isinstance(v, Mapping))
        if sections:
            looks_like = (
                "an LTX-2 single-file model checkpoint (e.g. a distilled or dev checkpoint)"
                if any(s in _SINGLE_FILE_SECTIONS for s in sections)
                else "not a latent upsampler file"
            )
            raise CheckpointError(
                f"expected a latent upsampler file with a flat config, but the config has the sections {sections}: "
                f"this is {looks_like}; pass a spatial/temporal upscaler .safetensors instead"
            )
        class_name = config.get("_class_name", CLASS_NAME)
        if class_name != CLASS_NAME:
            raise CheckpointError(f"config _class_name is {class_name!r}; a latent upsampler file says {CLASS_NAME!r}")
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in config.items() if k in known}
        try:
            return cls(**values)
        except ValueError as e:
            raise CheckpointError(f"invalid latent upsampler config: {e}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
