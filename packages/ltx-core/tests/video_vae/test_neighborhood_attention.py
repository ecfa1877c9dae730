"""Neighborhood attention against brute-force masked attention over the whole volume."""

from __future__ import annotations

import logging

import pytest
import torch

from ltx_core.model.video_vae.neighborhood_attention import choose_backend, na3d_blocked, na3d_gather


def _natten_window(i: int, length: int, kernel: int) -> range:
    """NATTEN's window, written case by case: centred, except pushed inward near either border."""
    half = kernel // 2
    if i < half:
        return range(0, kernel)
    if i > length - 1 - half:
        return range(length - kernel, length)
    return range(i - half, i + half + 1)


def _brute_force(q, k, v, kernel):
    """Full attention over every token under a mask built from `_natten_window`, token by token."""
    b, t, h, w, n, d = q.shape
    mask = torch.zeros(t, h, w, t, h, w, dtype=torch.bool)
    for ti in range(t):
        for hi in range(h):
            for wi in range(w):
                wt, wh, ww = (_natten_window(i, L, kn) for i, L, kn in zip((ti, hi, wi), (t, h, w), kernel))
                mask[ti, hi, wi, wt.start : wt.stop, wh.start : wh.stop, ww.start : ww.stop] = True
    tokens = t * h * w
    qf, kf, vf = (x.reshape(b, tokens, n, d) for x in (q, k, v))
    scores = torch.einsum("bqnd,bknd->bnqk", qf, kf).masked_fill(~mask.reshape(tokens, tokens), float("-inf"))
    return torch.einsum("bnqk,bknd->bqnd", scores.softmax(-1), vf).reshape(q.shape)


@pytest.mark.parametrize(
    "dims, kernel",
    [((3, 5, 6), (3, 3, 3)), ((4, 7, 9), (3, 5, 5)), ((5, 3, 4), (5, 3, 1)), ((3, 7, 7), (3, 7, 7))],
)
@pytest.mark.parametrize("impl", ["gather", "blocked", "blocked_small_blocks"])
def test_matches_brute_force_including_borders(dims, kernel, impl):
    gen = torch.Generator().manual_seed(sum(dims) + sum(kernel))
    q, k, v = (torch.randn(2, *dims, 2, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    if impl == "gather":
        got = na3d_gather(q, k, v, kernel)
    elif impl == "blocked":
        got = na3d_blocked(q, k, v, kernel)
    else:  # blocks smaller than the volume on every axis: many distinct border geometries
        got = na3d_blocked(q, k, v, kernel, query_block=(2, 2, 3))
    torch.testing.assert_close(got, _brute_force(q, k, v, kernel), atol=1e-10, rtol=1e-10)


def test_refuses_volume_smaller_than_kernel_and_even_kernels():
    x = torch.zeros(1, 2, 5, 5, 1, 4)
    with pytest.raises(ValueError, match=r"\(T, H, W\) >= kernel"):
        na3d_gather(x, x, x, (3, 3, 3))
    y = torch.zeros(1, 4, 5, 5, 1, 4)
    with pytest.raises(ValueError, match="odd"):
        na3d_blocked(y, y, y, (3, 2, 3))


def test_auto_backend_on_cpu_is_blocked_and_logged(caplog):
    with caplog.at_level(logging.INFO, logger="ltx_core.model.video_vae.neighborhood_attention"):
        backend = choose_backend(torch.device("cpu"))
    assert backend.name == "blocked"
    assert "neighborhood attention backend 'blocked'" in caplog.text
    with pytest.raises(ValueError, match="accepted: auto"):
        choose_backend(torch.device("cpu"), "flash")
