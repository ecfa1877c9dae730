"""The LTX-2.5 diffusion video decoder's architecture, read from `config["vae"]` (`CausalDiffusionVAE`).

The file nests the decoder under `vae.decoder` (stage ladders, kernels, upsample strides) and keeps
`model_output_type` and `latent_channels` at the `vae` level. Fields absent from the file take the
reference's defaults for the released decoder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltx_core.loader.errors import CheckpointError
from ltx_core.model.video_vae.vae_class import DIFFUSION_VAE_CLASS_NAME, is_diffusion_vae
from ltx_core.types import SpatioTemporalScaleFactors

Triple = tuple[int, int, int]

# The released decoder (used only for fields a file leaves out).
_DEFAULT_STAGE_CHANNELS = (1024, 512, 256, 256, 128)
_DEFAULT_STAGE_DEPTHS = (4, 6, 4, 2, 8)
_DEFAULT_STAGE_KERNELS = ((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5), (3, 3, 3))
_DEFAULT_UPSAMPLES = (((1, 2, 2), 2), ((2, 1, 1), 2), ((2, 2, 2), 1), ((2, 2, 2), 2))
_DEFAULT_STAGE5_KERNEL = (3, 7, 7)
MODEL_OUTPUT_TYPES = ("v", "x0")


def is_diffusion_vae_config(config: Mapping[str, Any]) -> bool:
    """Whether a checkpoint's whole `config` metadata describes the diffusion video VAE."""
    vae = config.get("vae")
    return isinstance(vae, Mapping) and is_diffusion_vae(vae)


def _triple(value: Any, where: str) -> Triple:
    if not (isinstance(value, Sequence) and len(value) == 3 and all(isinstance(v, int) and v >= 1 for v in value)):
        raise CheckpointError(f"vae decoder {where} must be three positive integers, got {value!r}")
    return (int(value[0]), int(value[1]), int(value[2]))


def default_rope_split(head_dim: int) -> Triple:
    """How a head's channels are shared among the (time, height, width) rotary axes (reference rule)."""
    if head_dim % 8:
        raise CheckpointError(f"vae decoder head_dim must be a multiple of 8, got {head_dim}")
    d_t = (head_dim // 4) // 2 * 2
    d_hw = (head_dim - d_t) // 2
    if d_hw % 2:
        d_t -= 2
        d_hw = (head_dim - d_t) // 2
    if d_t < 2 or d_hw < 2:
        raise CheckpointError(f"vae decoder head_dim {head_dim} leaves no rotary channels for time")
    return (d_t, d_hw, d_hw)


@dataclass(frozen=True)
class DiffusionDecoderConfig:
    """Stages 1-4 upsample the latent into a context volume; stage 5 denoises pixels under it."""

    in_channels: int = 128
    out_channels: int = 3
    patch_size: int = 4
    head_dim: int = 64
    t_emb_dim: int = 384
    num_inference_steps: int = 2
    timestep_scale_multiplier: float = 1.0
    model_output_type: str = "v"
    stage_channels: tuple[int, ...] = _DEFAULT_STAGE_CHANNELS
    stage_depths: tuple[int, ...] = _DEFAULT_STAGE_DEPTHS
    stage_kernels: tuple[Triple, ...] = _DEFAULT_STAGE_KERNELS
    upsamples: tuple[tuple[Triple, int], ...] = _DEFAULT_UPSAMPLES
    stage5_kernel: Triple = _DEFAULT_STAGE5_KERNEL
    stage5_channels: int | None = None

    @classmethod
    def from_checkpoint_config(cls, vae: Mapping[str, Any]) -> DiffusionDecoderConfig:
        if vae.get("_class_name") != DIFFUSION_VAE_CLASS_NAME:
            raise CheckpointError(
                f"vae _class_name {vae.get('_class_name')!r} is not the diffusion decoder's "
                f"{DIFFUSION_VAE_CLASS_NAME!r}"
            )
        dec = vae.get("decoder", vae)
        if not isinstance(dec, Mapping):
            raise CheckpointError(f"vae 'decoder' section must be an object, got {type(dec).__name__}")
        fields: dict[str, Any] = {
            "in_channels": int(dec.get("in_channels", vae.get("latent_channels", 128))),
            "out_channels": int(dec.get("out_channels", 3)),
            "patch_size": int(dec.get("patch_size", 4)),
            "head_dim": int(dec.get("head_dim", dec.get("na_head_dim", 64))),
            "t_emb_dim": int(dec.get("t_emb_dim", 384)),
            "num_inference_steps": int(dec.get("default_num_inference_steps", 2)),
            "timestep_scale_multiplier": float(dec.get("timestep_scale_multiplier", 1.0)),
            "model_output_type": str(vae.get("model_output_type", "v")),
        }
        if "stage_channels" in dec:
            fields["stage_channels"] = tuple(int(c) for c in dec["stage_channels"])
        if "stage_depths" in dec:
            fields["stage_depths"] = tuple(int(d) for d in dec["stage_depths"])
        if "stage_kernels" in dec:
            fields["stage_kernels"] = tuple(_triple(k, "stage_kernels") for k in dec["stage_kernels"])
        if "upsamples" in dec:
            try:
                fields["upsamples"] = tuple((_triple(s, "upsamples stride"), int(r)) for s, r in dec["upsamples"])
            except (TypeError, ValueError) as exc:
                raise CheckpointError(f"vae decoder upsamples must be [[t, h, w], reduction] pairs: {exc}") from exc
        if "stage5_kernel" in dec:
            fields["stage5_kernel"] = _triple(dec["stage5_kernel"], "stage5_kernel")
        if dec.get("stage5_channels") is not None:
            fields["stage5_channels"] = int(dec["stage5_channels"])
        return cls(**fields)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        n = len(self.stage_channels)
        if n < 2 or len(self.stage_depths) != n or len(self.stage_kernels) != n or len(self.upsamples) != n - 1:
            raise CheckpointError(
                "vae decoder needs as many stage_channels, stage_depths and stage_kernels as stages and one "
                f"upsample fewer; got {n}, {len(self.stage_depths)}, {len(self.stage_kernels)}, {len(self.upsamples)}"
            )
        if n != 5:
            raise CheckpointError(f"vae decoder must have 5 stages (4 deterministic + 1 diffusion), got {n}")
        for c in (*self.stage_channels, self.stage5_width):
            if c % self.head_dim:
                raise CheckpointError(f"vae decoder channels {c} are not a multiple of head_dim {self.head_dim}")
        default_rope_split(self.head_dim)
        for kernel in (*self.stage_kernels, self.stage5_kernel):
            if any(k % 2 == 0 for k in kernel):
                raise CheckpointError(f"vae decoder neighborhood kernels must be odd, got {kernel}")
        for i, (stride, reduction) in enumerate(self.upsamples):
            # A temporal stride of 2 drops the duplicated leading frame (causal 1 -> 1 + 2(n-1) mapping).
            if stride[0] not in (1, 2) or reduction < 1:
                raise CheckpointError(f"vae decoder upsample stride {stride} / reduction {reduction} is not supported")
            if self.stage_channels[i] % reduction or self.stage_channels[i] // reduction != self.stage_channels[i + 1]:
                raise CheckpointError(
                    f"vae decoder upsample {i} turns {self.stage_channels[i]} channels into "
                    f"{self.stage_channels[i] // reduction}, but stage {i + 1} has {self.stage_channels[i + 1]}"
                )
        if self.model_output_type not in MODEL_OUTPUT_TYPES:
            raise CheckpointError(
                f"vae model_output_type {self.model_output_type!r} is not supported; "
                f"accepted: {list(MODEL_OUTPUT_TYPES)}"
            )
        if self.num_inference_steps < 1:
            raise CheckpointError(
                f"vae decoder default_num_inference_steps must be >= 1, got {self.num_inference_steps}"
            )

    @property
    def stage5_width(self) -> int:
        return self.stage5_channels if self.stage5_channels is not None else self.stage_channels[-1]

    @property
    def scale(self) -> SpatioTemporalScaleFactors:
        """Pixels (frames) per latent cell: every upsample stride, times the patch size in space."""
        t = math.prod(s[0] for s, _ in self.upsamples)
        h = math.prod(s[1] for s, _ in self.upsamples) * self.patch_size
        w = math.prod(s[2] for s, _ in self.upsamples) * self.patch_size
        return SpatioTemporalScaleFactors(time=t, height=h, width=w)

    @property
    def ghost_latent_frames(self) -> int:
        """Copies of the last latent frame appended through stages 1-4 (reference border workaround)."""
        return (self.stage_kernels[0][0] // 2) * 2
