"""Whether half-precision matmuls are faster than float32 ones on this CPU, measured (op kind "matmul").

Used where a whole run's precision follows from it (the trainer's bf16 autocast on the CPU): on a
CPU with AVX512-BF16 or AMX a bf16 Linear measured 0.5x the float32 one, on an AVX2 CPU ~8x.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ltx_core.tune.choices import KernelChoices, OpKey, size_class


def matmul_path(choices: KernelChoices, in_features: int, out_features: int, tokens: int, dtype: torch.dtype) -> str:
    """ "native" or "float32": the faster way to run a (tokens x in) @ (in x out) Linear held in `dtype`."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, in_features, generator=g)
    w = torch.randn(out_features, in_features, generator=g)
    x_half, w_half = x.to(dtype), w.to(dtype)
    key = OpKey("matmul", str(dtype).removeprefix("torch."), f"{in_features}x{out_features}.t{size_class(tokens)}")
    candidates = {"native": lambda: F.linear(x_half, w_half), "float32": lambda: F.linear(x, w)}
    return choices.choose(key, candidates, default="native", work=float(tokens) * in_features * out_features)
