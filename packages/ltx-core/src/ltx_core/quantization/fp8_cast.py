"""fp8-cast: transformer-block Linear weights stored as float8_e4m3fn, upcast in the forward pass.

Storage only: no scale is applied (the released bf16 weights fit e4m3's range), so the matmul runs
in the activation dtype and works on every device, the CPU included. What it saves is memory: the
selected Linears hold one byte per weight (and bias) instead of two.

Selection (the reference's rule): every `nn.Linear` whose qualified name contains
`transformer_blocks.` and ends with `.to_q`, `.to_k`, `.to_v`, `.to_out.0`, `ff.net.0.proj` or
`ff.net.2` -- the q/k/v/out projections of all attentions of a block and both feed-forward
layers, video and audio. Gate logits, AdaLN, patchify, caption and output layers stay as they are.

LoRA under this policy (see `fuse_into_fp8`): the delta is formed by the bfloat16 rule, added in
bfloat16 to the float8 weight read back as bfloat16, and the sum is cast to float8 again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

FP8_STORAGE_DTYPE = torch.float8_e4m3fn


@dataclass(frozen=True)
class Fp8CastPolicy:
    """Which Linears are stored in float8 (module-name rule), and in which float8 format."""

    must_contain: str = "transformer_blocks."
    suffixes: tuple[str, ...] = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")
    storage_dtype: torch.dtype = FP8_STORAGE_DTYPE

    name = "fp8-cast"

    def selects(self, module_name: str, module: nn.Module) -> bool:
        return (
            isinstance(module, nn.Linear)
            and self.must_contain in module_name
            and any(module_name.endswith(s) for s in self.suffixes)
        )

    def module_names(self, model: nn.Module) -> list[str]:
        """The qualified names of the Linears this policy stores in float8, sorted."""
        return sorted(name for name, module in model.named_modules() if self.selects(name, module))

    def prepare(self, model: nn.Module) -> list[str]:
        """Turn the selected Linears of `model` (built on the meta device) into `UpcastLinear`s.

        Only the class changes, so parameter names and the checkpoint's key layout stay the same;
        the float8 values arrive at load time. Returns the names of the swapped modules.
        """
        names = self.module_names(model)
        for name in names:
            module = model.get_submodule(name)
            module.__class__ = UpcastLinear
        return names

    def tensor_dtype(self, key: str, quantized_modules: frozenset[str]) -> torch.dtype | None:
        """The storage dtype of state-dict key `key`, or None when the policy leaves it alone."""
        module, _, leaf = key.rpartition(".")
        if leaf in ("weight", "bias") and module in quantized_modules:
            return self.storage_dtype
        return None


class UpcastLinear(nn.Linear):
    """A Linear whose stored weight/bias may be in a narrower dtype than its input: cast, then matmul."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), bias)


def downcast(value: torch.Tensor, storage_dtype: torch.dtype = FP8_STORAGE_DTYPE) -> torch.Tensor:
    """Round to nearest even into the float8 format (values beyond its range saturate to NaN in
    e4m3fn, so a checkpoint with such weights needs a scaled format instead)."""
    return value.to(storage_dtype)


def fuse_into_fp8(weight: torch.Tensor, delta_bf16: torch.Tensor) -> torch.Tensor:
    """LoRA fusion into a float8 weight: float8 -> bfloat16, add the bfloat16 delta, round back."""
    fused = weight.to(torch.bfloat16) + delta_bf16.to(weight.device, torch.bfloat16)
    return fused.to(weight.dtype)
