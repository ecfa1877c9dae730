"""The attention seam: SDPA on CPU and for masked calls, numerically plain softmax attention."""

from __future__ import annotations

import torch

from ltx_core.model.transformer.attention_backends import AttentionBackend, attend, select_backend


def _naive(q, k, v, heads, bias=None):
    b, t, width = q.shape
    d = width // heads
    qh, kh, vh = (x.view(b, -1, heads, d).transpose(1, 2) for x in (q, k, v))
    scores = qh @ kh.transpose(-1, -2) / d**0.5
    if bias is not None:
        scores = scores + bias
    return (scores.softmax(-1) @ vh).transpose(1, 2).reshape(b, t, width)


def test_cpu_always_uses_sdpa():
    q = torch.randn(1, 4, 16, dtype=torch.bfloat16)
    assert select_backend(q, 2, masked=False) is AttentionBackend.SDPA
    assert select_backend(q, 2, masked=True) is AttentionBackend.SDPA


def test_attend_matches_softmax_attention(assert_close):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, 24, generator=g) for n in (5, 7, 7))
    assert_close(attend(q, k, v, 3), _naive(q, k, v, 3), atol=1e-5)
    bias = torch.zeros(2, 1, 1, 7)
    bias[0, ..., 5:] = -torch.finfo(torch.float32).max
    assert_close(attend(q, k, v, 3, bias), _naive(q, k, v, 3, bias), atol=1e-5)
    # masked keys carry no weight: changing them does not move the first item
    v2 = v.clone()
    v2[0, 5:] = 1000.0
    assert_close(attend(q, k, v2, 3, bias)[0], attend(q, k, v, 3, bias)[0])
