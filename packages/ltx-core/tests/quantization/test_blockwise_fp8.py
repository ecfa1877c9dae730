"""Blockwise float8: format round trip, the PyTorch reference product, and the Triton kernel against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from ltx_core.quantization.blockwise import (
    BlockwiseFp8Linear,
    BlockwiseFp8Policy,
    blockwise_matmul_reference,
    dequantize_weight,
    quantize_activation_blockwise,
    quantize_weight_blockwise,
    triton_available,
)


def test_weight_blocks_have_their_own_scale_and_round_trip_within_e4m3_precision():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(200, 300, generator=g)
    w[:128, :128] *= 100  # one loud block must not cost the others their precision
    wq, scale = quantize_weight_blockwise(w)
    assert wq.dtype == torch.float8_e4m3fn and wq.shape == w.shape
    assert scale.shape == (2, 3) and scale.dtype == torch.float32
    assert scale[0, 0] > 50 * scale[1, 1]
    err = (dequantize_weight(wq, scale) - w).abs()
    # e4m3 keeps 3 mantissa bits: relative rounding error <= 2^-4 of each block's values
    assert bool((err <= w.abs() * 2**-4 + scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:200, :300]).all())


def test_reference_product_approximates_the_float_matmul():
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(7, 260, generator=g), torch.randn(130, 260, generator=g), torch.randn(130, generator=g)
    xq, xs = quantize_activation_blockwise(x)
    wq, ws = quantize_weight_blockwise(w)
    got = blockwise_matmul_reference(xq, xs, wq, ws, b, torch.float32)
    want = x @ w.t() + b
    assert float((got - want).norm() / want.norm()) < 0.05


def test_policy_swaps_block_linears_but_not_gates(make_model_for_blockwise):
    model = make_model_for_blockwise()
    names = BlockwiseFp8Policy().apply(model)
    assert names and all(n.startswith("transformer_blocks.") for n in names)
    assert isinstance(model.transformer_blocks[0].attn1.to_q, BlockwiseFp8Linear)
    assert isinstance(model.transformer_blocks[0].attn1.to_gate_logits, torch.nn.Linear)


_KERNEL_CHECK = textwrap.dedent(
    """
    import json, torch
    from ltx_core.quantization.blockwise import (
        blockwise_matmul_reference, quantize_activation_blockwise, quantize_weight_blockwise)
    from ltx_core.quantization.blockwise.triton_gemm import blockwise_matmul_triton
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for m, n, k, bias in ((5, 128, 128, False), (20, 150, 200, True), (33, 260, 384, True)):
        x, w = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
        b = torch.randn(n, generator=g) if bias else None
        xq, xs = quantize_activation_blockwise(x)
        wq, ws = quantize_weight_blockwise(w)
        want = blockwise_matmul_reference(xq, xs, wq, ws, b, torch.float32)
        got = blockwise_matmul_triton(xq, xs, wq, ws, b, torch.float32, block_m=16)
        worst = max(worst, float((got - want).abs().max() / want.abs().max()))
    print(json.dumps({"worst_relative": worst}))
    """
)


@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
def test_triton_kernel_matches_the_reference_under_the_interpreter():
    # TRITON_INTERPRET is read when kernels are decorated, so the check runs in a fresh interpreter.
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-c", _KERNEL_CHECK], env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0 and "interpret" in result.stderr.lower() and "not supported" in result.stderr.lower():
        pytest.skip(f"this triton's interpreter cannot run the kernel: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-2000:]
    worst = json.loads(result.stdout.strip().splitlines()[-1])["worst_relative"]
    # Same products, summed block by block instead of at once: float32 reassociation only.
    assert worst < 1e-5, f"kernel differs from the reference by {worst:.2e} of the output's max |value|"


@pytest.mark.gpu
@pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9) and triton_available()),
    reason="needs a CUDA GPU with native float8 (compute capability >= 8.9) and triton",
)
def test_triton_kernel_on_the_gpu_matches_the_reference():
    from ltx_core.quantization.blockwise.triton_gemm import blockwise_matmul_triton

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(300, 512, device="cuda", generator=g)
    w = torch.randn(384, 512, device="cuda", generator=g)
    xq, xs = quantize_activation_blockwise(x)
    wq, ws = quantize_weight_blockwise(w)
    want = blockwise_matmul_reference(xq, xs, wq, ws, None, torch.float32)
    got = blockwise_matmul_triton(xq, xs, wq, ws, None, torch.float32)
    assert torch.allclose(got, want, atol=1e-2, rtol=1e-3)
