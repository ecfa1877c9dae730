"""fp8-scaled-mm: float8 checkpoints (`.weight_scale`, `.input_scale`) run through `torch._scaled_mm`.

A Linear is served this way when its checkpoint weight is stored as F8_E4M3 and a sibling
`<module>.weight_scale` (float32 scalar) exists; `<module>.input_scale` is the static activation
scale (when a file lacks it, the scale is taken per call from the activation's max |value|).
Forward: x / input_scale, clamped to e4m3's range, cast to float8, then
`_scaled_mm(xq, W^T, input_scale, weight_scale)` in the activation dtype, plus the bias.
Needs a GPU with native float8 matmuls (`capability.require_scaled_mm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from ltx_core.loader.file_index import TensorInfo
from ltx_core.quantization.capability import require_scaled_mm

_E4M3 = torch.float8_e4m3fn
_E4M3_MAX = torch.finfo(_E4M3).max


class ScaledMMLinear(nn.Linear):
    """A Linear with a float8 weight and per-tensor float32 weight/input scales."""

    weight_scale: torch.Tensor
    input_scale: torch.Tensor | None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_scaled_mm(x.device)
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        scale_a = self.input_scale
        if scale_a is None:
            scale_a = (flat.abs().amax().float() / _E4M3_MAX).clamp(min=1e-12)
        scale_a = scale_a.to(x.device, torch.float32)
        xq = torch.clamp(flat / scale_a.to(flat.dtype), -_E4M3_MAX, _E4M3_MAX).to(_E4M3)
        out = torch._scaled_mm(
            xq, self.weight.t(), scale_a=scale_a, scale_b=self.weight_scale.float(), out_dtype=x.dtype,
            use_fast_accum=True,
        )  # fmt: skip
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.reshape(*lead, out.shape[-1])


def dequantized_linear(module: ScaledMMLinear, x: torch.Tensor) -> torch.Tensor:
    """The same product computed by dequantizing (any device): the reference the GPU path is checked against."""
    scale_a = module.input_scale
    flat = x.reshape(-1, x.shape[-1]).float()
    if scale_a is None:
        scale_a = (flat.abs().amax() / _E4M3_MAX).clamp(min=1e-12)
    xq = torch.clamp(flat / scale_a.float(), -_E4M3_MAX, _E4M3_MAX).to(_E4M3).float() * scale_a.float()
    out = xq @ (module.weight.float() * module.weight_scale.float()).t()
    if module.bias is not None:
        out = out + module.bias.float()
    return out.to(x.dtype).reshape(*x.shape[:-1], out.shape[-1])


@dataclass(frozen=True)
class Fp8ScaledMMPolicy:
    """Swap the Linears a float8 checkpoint quantized (F8_E4M3 weight + `.weight_scale`) to `ScaledMMLinear`."""

    name = "fp8-scaled-mm"

    @staticmethod
    def quantized_modules(tensors: Mapping[str, TensorInfo]) -> list[str]:
        """Module names whose weight is stored F8_E4M3 with a `.weight_scale` sibling (module-key space)."""
        return sorted(
            key[: -len(".weight")]
            for key, info in tensors.items()
            if key.endswith(".weight")
            and info.dtype == "F8_E4M3"
            and key[: -len(".weight")] + ".weight_scale" in tensors
        )

    def prepare(self, model: nn.Module, tensors: Mapping[str, TensorInfo]) -> list[str]:
        names = self.quantized_modules(tensors)
        if not names:
            raise ValueError(
                "fp8-scaled-mm needs a float8 checkpoint (F8_E4M3 weights with '.weight_scale' entries); "
                "this file has none. Use --quantization fp8-cast for a bfloat16 checkpoint."
            )
        for name in names:
            module = model.get_submodule(name)
            if not isinstance(module, nn.Linear):
                raise ValueError(f"fp8-scaled-mm: {name!r} is a {type(module).__name__}, not a Linear")
            module.__class__ = ScaledMMLinear
            module.register_buffer("weight_scale", torch.empty((), device="meta"))
            has_input = name + ".input_scale" in tensors
            module.register_buffer("input_scale", torch.empty((), device="meta") if has_input else None)
        return names

    @staticmethod
    def storage_dtypes(names: list[str]) -> dict[str, torch.dtype]:
        out: dict[str, torch.dtype] = {}
        for name in names:
            out[name + ".weight"] = _E4M3
            out[name + ".weight_scale"] = torch.float32
            out[name + ".input_scale"] = torch.float32
        return out
