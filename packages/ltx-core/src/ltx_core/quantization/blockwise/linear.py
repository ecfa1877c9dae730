"""A Linear holding blockwise float8 weights, and the policy that quantizes the transformer blocks."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch
from torch import nn

from ltx_core.quantization.blockwise.reference import (
    blockwise_matmul_reference,
    quantize_activation_blockwise,
    quantize_weight_blockwise,
)
from ltx_core.quantization.capability import supports_scaled_mm


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


class BlockwiseFp8Linear(nn.Module):
    """y = x W^T + b with W in 128 x 128 float8 blocks and x quantized in 1 x 128 blocks per call.

    Runs the Triton kernel on GPUs with native float8 (compute capability >= 8.9), else the
    PyTorch reference (same formula, float32 arithmetic) -- correct everywhere, fast only there.
    """

    def __init__(self, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.register_buffer("weight", weight)
        self.register_buffer("weight_scale", weight_scale)
        self.register_buffer("bias", None if bias is None else bias.float())

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> BlockwiseFp8Linear:
        weight, scale = quantize_weight_blockwise(linear.weight.detach())
        return cls(weight, scale, None if linear.bias is None else linear.bias.detach())

    def uses_kernel(self, x: torch.Tensor) -> bool:
        return supports_scaled_mm(x.device) and triton_available()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        xq, x_scale = quantize_activation_blockwise(x.reshape(-1, x.shape[-1]))
        if self.uses_kernel(x):
            from ltx_core.quantization.blockwise.triton_gemm import blockwise_matmul_triton

            out = blockwise_matmul_triton(xq, x_scale, self.weight, self.weight_scale, self.bias, x.dtype)
        else:
            out = blockwise_matmul_reference(xq, x_scale, self.weight, self.weight_scale, self.bias, x.dtype)
        return out.reshape(*lead, self.out_features)


@dataclass(frozen=True)
class BlockwiseFp8Policy:
    """Quantize every Linear inside the transformer blocks except the per-head gate logits.

    Patchify, AdaLN, caption and output layers live outside the blocks and stay as they are.
    Applied to a loaded model (weights are quantized from their loaded values, LoRAs included).
    """

    must_contain: str = "transformer_blocks."
    excluded_suffixes: tuple[str, ...] = ("to_gate_logits",)

    name = "blockwise-fp8"

    def selects(self, name: str, module: nn.Module) -> bool:
        return (
            isinstance(module, nn.Linear)
            and self.must_contain in name
            and not any(name.endswith(s) for s in self.excluded_suffixes)
        )

    def apply(self, model: nn.Module) -> list[str]:
        names = sorted(n for n, m in model.named_modules() if self.selects(n, m))
        for name in names:
            parent_name, _, leaf = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, leaf, BlockwiseFp8Linear.from_linear(getattr(parent, leaf)))
        return names
