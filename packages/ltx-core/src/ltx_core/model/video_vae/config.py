"""The video VAE architecture, as described by a checkpoint's `config["vae"]` section.

The released files describe the encoder and decoder as block lists, e.g.
`["compress_space_res", {"multiplier": 2}]`; everything else is a handful of flags. Fields absent
from the section take the reference defaults (a decoder padded with `reflect`, timestep-conditioned,
128 base channels), so older headers that omit them still build the architecture they were trained
with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltx_core.loader.errors import CheckpointError
from ltx_core.types import SpatioTemporalScaleFactors

CONV_VAE_CLASS_NAME = "CausalVideoAutoencoder"

# Strides (time, height, width) of the compression blocks; the `_res` and `_x_y` forms share them.
_STRIDES = {"time": (2, 1, 1), "space": (1, 2, 2), "all": (2, 2, 2)}

# Encoder block -> default channel multiplier (None: the block keeps its channel count).
ENCODER_BLOCK_KINDS: dict[str, int | None] = {
    "res_x": None,
    "res_x_y": 2,
    "compress_time": None,
    "compress_space": None,
    "compress_all": None,
    "compress_all_x_y": 2,
    "compress_time_res": 2,
    "compress_space_res": 2,
    "compress_all_res": 2,
}
# Decoder block -> default channel divisor (applied while upsampling, or by res_x_y).
DECODER_BLOCK_KINDS: dict[str, int | None] = {
    "res_x": None,
    "res_x_y": 2,
    "compress_time": 1,
    "compress_space": 1,
    "compress_all": 1,
}

NORM_LAYERS = ("pixel_norm", "group_norm")
# How the encoder's extra output channels carry the log-variance; only the means are ever used.
LATENT_LOG_VAR_MODES = ("uniform", "per_channel", "constant")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


@dataclass(frozen=True)
class VAEBlock:
    """One entry of an encoder or decoder block list."""

    kind: str
    num_layers: int = 1
    multiplier: int | None = None
    residual: bool = False

    @property
    def stride(self) -> tuple[int, int, int]:
        """(time, height, width) resampling factor of this block; (1, 1, 1) for residual stacks."""
        if not self.kind.startswith("compress_"):
            return (1, 1, 1)
        axis = self.kind.split("_")[1]
        return _STRIDES[axis]

    @classmethod
    def parse(cls, entry: Any, accepted: Mapping[str, int | None], where: str) -> VAEBlock:
        if not (isinstance(entry, Sequence) and not isinstance(entry, str) and len(entry) == 2):
            raise CheckpointError(f"{where}: each block must be [name, params], got {entry!r}")
        kind, params = entry
        if kind not in accepted:
            raise CheckpointError(f"{where}: unsupported block {kind!r}; accepted blocks: {sorted(accepted)}")
        # Old headers give a bare layer count instead of a params dict.
        params = {"num_layers": params} if isinstance(params, int) else dict(params or {})
        if params.get("inject_noise", False):
            raise CheckpointError(f"{where}: block {kind!r} asks for inject_noise, which this implementation lacks")
        multiplier = params.get("multiplier", accepted[kind])
        num_layers = int(params.get("num_layers", 1))
        if num_layers < 1 or (multiplier is not None and int(multiplier) < 1):
            raise CheckpointError(f"{where}: block {kind!r} has invalid params {params!r}")
        return cls(
            kind=kind,
            num_layers=num_layers,
            multiplier=None if multiplier is None else int(multiplier),
            residual=bool(params.get("residual", False)),
        )


def scale_factors_of(blocks: Sequence[VAEBlock], patch_size: int) -> SpatioTemporalScaleFactors:
    """Pixels (frames) per latent cell: the patch size times 2 per spatial compression, 2 per temporal."""
    time = math.prod(b.stride[0] for b in blocks)
    space = patch_size * math.prod(b.stride[1] for b in blocks)
    return SpatioTemporalScaleFactors(time=time, height=space, width=space)


def _choice(section: Mapping[str, Any], key: str, default: str, accepted: Sequence[str]) -> str:
    value = section.get(key, default)
    if value not in accepted:
        raise CheckpointError(f"vae config {key!r} is {value!r}; accepted: {list(accepted)}")
    return value


@dataclass(frozen=True)
class VideoVAEConfig:
    """Everything the encoder and decoder constructors need."""

    encoder_blocks: tuple[VAEBlock, ...]
    decoder_blocks: tuple[VAEBlock, ...]
    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 128
    patch_size: int = 4
    norm_layer: str = "pixel_norm"
    latent_log_var: str = "uniform"
    encoder_padding: str = "zeros"
    decoder_padding: str = "reflect"
    causal_decoder: bool = False
    timestep_conditioning: bool = True
    decoder_base_channels: int = 128

    @classmethod
    def from_checkpoint_config(cls, vae: Mapping[str, Any]) -> VideoVAEConfig:
        """Parse the `vae` section of a checkpoint's config metadata."""
        if not isinstance(vae, Mapping):
            raise CheckpointError(f"the 'vae' config section must be an object, got {type(vae).__name__}")
        class_name = vae.get("_class_name", CONV_VAE_CLASS_NAME)
        if class_name != CONV_VAE_CLASS_NAME:
            raise CheckpointError(
                f"vae _class_name {class_name!r} is not supported by this builder; only the convolutional "
                f"{CONV_VAE_CLASS_NAME!r} (LTX-2 / LTX-2.3) decoder is built here; the LTX-2.5 diffusion decoder "
                "(CausalDiffusionVAE) is built by DIFFUSION_VIDEO_DECODER"
            )
        if vae.get("dims", 3) != 3:
            raise CheckpointError(f"vae dims {vae.get('dims')!r} is not supported; only 3-D convolutions (dims=3)")
        encoder_blocks = tuple(
            VAEBlock.parse(b, ENCODER_BLOCK_KINDS, "vae encoder_blocks") for b in vae.get("encoder_blocks", ())
        )
        decoder_blocks = tuple(
            VAEBlock.parse(b, DECODER_BLOCK_KINDS, "vae decoder_blocks") for b in vae.get("decoder_blocks", ())
        )
        # The reference reads the encoder's padding from `spatial_padding_mode` when the flat header
        # has it, and only otherwise from `encoder_spatial_padding_mode`; keep that precedence.
        encoder_padding_key = (
            "spatial_padding_mode" if "spatial_padding_mode" in vae else "encoder_spatial_padding_mode"
        )
        config = cls(
            encoder_blocks=encoder_blocks,
            decoder_blocks=decoder_blocks,
            in_channels=int(vae.get("in_channels", 3)),
            out_channels=int(vae.get("out_channels", 3)),
            latent_channels=int(vae.get("latent_channels", 128)),
            patch_size=int(vae.get("patch_size", 4)),
            norm_layer=_choice(vae, "norm_layer", "pixel_norm", NORM_LAYERS),
            latent_log_var=_choice(vae, "latent_log_var", "uniform", LATENT_LOG_VAR_MODES),
            encoder_padding=_choice(vae, encoder_padding_key, "zeros", PADDING_MODES),
            decoder_padding=_choice(vae, "spatial_padding_mode", "reflect", PADDING_MODES),
            causal_decoder=bool(vae.get("causal_decoder", False)),
            timestep_conditioning=bool(vae.get("timestep_conditioning", True)),
            decoder_base_channels=int(vae.get("decoder_base_channels", 128)),
        )
        config.check()
        return config

    def check(self) -> None:
        for name in ("in_channels", "out_channels", "latent_channels", "patch_size", "decoder_base_channels"):
            if getattr(self, name) < 1:
                raise CheckpointError(f"vae {name} must be >= 1, got {getattr(self, name)}")
        if self.encoder_scale != self.decoder_scale and self.encoder_blocks and self.decoder_blocks:
            raise CheckpointError(
                f"vae encoder and decoder compress differently: {self.encoder_scale} vs {self.decoder_scale}"
            )

    @property
    def encoder_scale(self) -> SpatioTemporalScaleFactors:
        return scale_factors_of(self.encoder_blocks, self.patch_size)

    @property
    def decoder_scale(self) -> SpatioTemporalScaleFactors:
        return scale_factors_of(self.decoder_blocks, self.patch_size)
