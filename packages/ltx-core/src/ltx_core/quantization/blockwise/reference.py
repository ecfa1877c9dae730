"""Blockwise float8 quantization and its matmul in plain PyTorch (the definition the kernel must meet).

Weights (N, K) are cut into 128 x 128 blocks, activations (M, K) into 1 x 128 blocks along K; each
block is divided by its own float32 scale amax / 448 (e4m3's largest finite value) and cast to
float8_e4m3fn. The product is

    out[m, n] = sum_kb  scale_x[m, kb] * scale_w[n // 128, kb] * sum_{k in kb} xq[m, k] * wq[n, k]

accumulated in float32.
"""

from __future__ import annotations

import torch

BLOCK = 128
E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)
_TINY = 1e-12  # all-zero blocks get this scale, so dividing by it is safe and they stay zero


def _blocks(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK


def quantize_weight_blockwise(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) -> (float8 (N, K), float32 scales (ceil(N/128), ceil(K/128)))."""
    n, k = weight.shape
    nb, kb = _blocks(n), _blocks(k)
    padded = torch.zeros(nb * BLOCK, kb * BLOCK, dtype=torch.float32, device=weight.device)
    padded[:n, :k] = weight.float()
    tiles = padded.view(nb, BLOCK, kb, BLOCK)
    scale = (tiles.abs().amax(dim=(1, 3)) / E4M3_MAX).clamp(min=_TINY)
    quantized = (tiles / scale[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return quantized.view(nb * BLOCK, kb * BLOCK)[:n, :k].contiguous(), scale


def quantize_activation_blockwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, K) -> (float8 (M, K), float32 scales (M, ceil(K/128)))."""
    m, k = x.shape
    kb = _blocks(k)
    padded = torch.zeros(m, kb * BLOCK, dtype=torch.float32, device=x.device)
    padded[:, :k] = x.float()
    tiles = padded.view(m, kb, BLOCK)
    scale = (tiles.abs().amax(dim=2) / E4M3_MAX).clamp(min=_TINY)
    quantized = (tiles / scale[:, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return quantized.view(m, kb * BLOCK)[:, :k].contiguous(), scale


def dequantize_weight(wq: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    n, k = wq.shape
    full = scale.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    return wq.float() * full


def dequantize_activation(xq: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return xq.float() * scale.repeat_interleave(BLOCK, dim=1)[:, : xq.shape[1]]


def blockwise_matmul_reference(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """x @ w^T (+ bias) from the blockwise-quantized operands, in float32 (any device)."""
    out = dequantize_activation(xq, x_scale) @ dequantize_weight(wq, w_scale).t()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)
