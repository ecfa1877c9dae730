"""The blockwise float8 GEMM as a Triton kernel (imported lazily: Triton is optional).

One program computes a BLOCK_M x 128 output tile, walking K in 128-wide steps: each step multiplies
a (BLOCK_M, 128) activation tile by a (128, 128) weight block (float8 operands, float32
accumulation), scales the partial product by the activations' per-row scale and the weight block's
scale, and adds it to the accumulator -- the formula of `reference.blockwise_matmul_reference`.
On GPUs the float8 tiles go straight into `tl.dot`; under the interpreter (TRITON_INTERPRET=1, how it
is tested on the CPU) they are widened to float32 first.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ltx_core.quantization.blockwise.reference import BLOCK


@triton.jit
def _blockwise_fp8_gemm_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, a_scale_ptr, b_scale_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bsn, stride_bsk,
    HAS_BIAS: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k = kb * BLOCK_K + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
            mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0,
        )  # fmt: skip
        b = tl.load(
            b_ptr + offs_n[None, :] * stride_bn + k[:, None] * stride_bk,
            mask=(offs_n[None, :] < N) & (k[:, None] < K), other=0.0,
        )  # fmt: skip
        if UPCAST:
            partial = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        else:
            partial = tl.dot(a, b)
        a_scale = tl.load(a_scale_ptr + offs_m * stride_asm + kb * stride_ask, mask=offs_m < M, other=0.0)
        b_scale = tl.load(b_scale_ptr + pid_n * stride_bsn + kb * stride_bsk)
        acc += partial * a_scale[:, None] * b_scale
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        acc += bias[None, :]
    c = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def blockwise_matmul_triton(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.bfloat16,
    block_m: int = 64,
) -> torch.Tensor:
    """xq (M, K) float8, x_scale (M, K/128), wq (N, K) float8, w_scale (N/128, K/128) -> (M, N)."""
    m, k = xq.shape
    n = wq.shape[0]
    if wq.shape[1] != k:
        raise ValueError(f"activation has K={k}, weight has K={wq.shape[1]}")
    out = torch.empty(m, n, dtype=out_dtype, device=xq.device)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, BLOCK))
    _blockwise_fp8_gemm_kernel[grid](
        xq, wq, out, bias if bias is not None else out, x_scale, w_scale,
        m, n, k,
        xq.stride(0), xq.stride(1), wq.stride(0), wq.stride(1), out.stride(0), out.stride(1),
        x_scale.stride(0), x_scale.stride(1), w_scale.stride(0), w_scale.stride(1),
        HAS_BIAS=bias is not None, UPCAST=interpreted(),
        BLOCK_M=block_m, BLOCK_N=BLOCK, BLOCK_K=BLOCK,
    )  # fmt: skip
    return out
