"""Rotary embeddings: layouts, relative-position property, and a slow per-channel reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ltx_core.model.transformer.rope import RopeType, apply_rotary, frequency_grid, rotary_embedding


def _extents(points: torch.Tensor) -> torch.Tensor:
    """(B, axes, T) points -> (B, axes, T, 2) zero-length extents whose midpoint is the point."""
    return torch.stack([points, points], dim=-1)


def _slow_rotate(
    x: torch.Tensor, points: np.ndarray, dim: int, heads: int, max_pos, rope_type: RopeType, theta: float
) -> np.ndarray:
    """Reference written channel by channel in float64 from the formula (no vectorisation)."""
    axes = len(max_pos)
    n_freq = dim // (2 * axes)
    freqs = [math.pi / 2 * theta ** (i / (n_freq - 1)) if n_freq > 1 else math.pi / 2 for i in range(n_freq)]
    xs = x.double().numpy()
    out = xs.copy()
    b_size, t_size, _ = xs.shape
    head_dim = dim // heads
    for b in range(b_size):
        for t in range(t_size):
            # angles in frequency-major, axis-minor order, front-padded with zero angles
            angles = [freqs[f] * (2 * points[b, a, t] / max_pos[a] - 1) for f in range(n_freq) for a in range(axes)]
            if rope_type is RopeType.SPLIT:
                angles = [0.0] * (dim // 2 - len(angles)) + angles
                for h in range(heads):
                    half = head_dim // 2
                    for i in range(half):
                        theta = angles[h * half + i]
                        c1, c2 = h * head_dim + i, h * head_dim + half + i
                        x1, x2 = xs[b, t, c1], xs[b, t, c2]
                        out[b, t, c1] = x1 * math.cos(theta) - x2 * math.sin(theta)
                        out[b, t, c2] = x2 * math.cos(theta) + x1 * math.sin(theta)
            else:
                pair_angles = [0.0] * ((dim - 2 * len(angles)) // 2) + angles
                pad = dim % (2 * axes)
                # an odd pad would leave an unpaired channel; the configs never produce it
                assert pad % 2 == 0
                for p, theta in enumerate(pair_angles):
                    c1, c2 = 2 * p, 2 * p + 1
                    x1, x2 = xs[b, t, c1], xs[b, t, c2]
                    out[b, t, c1] = x1 * math.cos(theta) - x2 * math.sin(theta)
                    out[b, t, c2] = x2 * math.cos(theta) + x1 * math.sin(theta)
    return out


# Angles are formed in float32 on purpose (reference numerics): with theta 1e4 they reach ~1.6e4 rad,
# whose float32 rounding (~1e-3 rad) the float64 reference sees; a small theta isolates the layout.
@pytest.mark.parametrize(("theta", "atol"), [(10.0, 2e-5), (10000.0, 1e-2)])
@pytest.mark.parametrize("rope_type", list(RopeType))
@pytest.mark.parametrize(("dim", "heads", "max_pos"), [(48, 2, (20, 64, 64)), (32, 4, (20,)), (40, 2, (8, 16, 16))])
def test_matches_slow_reference(rope_type, dim, heads, max_pos, theta, atol):
    g = torch.Generator().manual_seed(0)
    points = torch.rand(2, len(max_pos), 5, generator=g) * torch.tensor(max_pos, dtype=torch.float32)[None, :, None]
    x = torch.randn(2, 5, dim, generator=g)
    pe = rotary_embedding(_extents(points), dim=dim, heads=heads, max_pos=max_pos, rope_type=rope_type, theta=theta)
    got = apply_rotary(x, pe).double().numpy()
    want = _slow_rotate(x, points.double().numpy(), dim, heads, max_pos, rope_type, theta)
    np.testing.assert_allclose(got, want, atol=atol, rtol=0)


@pytest.mark.parametrize("rope_type", list(RopeType))
def test_dot_products_depend_only_on_relative_position(rope_type, assert_close):
    """<R(p) q, R(p') k> is unchanged when both positions shift by the same amount (per head)."""
    dim, heads, max_pos = 32, 2, (100.0,)  # small theta: float32 angle rounding stays ~1e-6
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 1, dim, generator=g), torch.randn(1, 1, dim, generator=g)

    def score(p_q: float, p_k: float) -> torch.Tensor:
        pts = torch.tensor([[[p_q, p_k]]], dtype=torch.float64)
        pe = rotary_embedding(
            _extents(pts), dim=dim, heads=heads, max_pos=max_pos, rope_type=rope_type, theta=10.0, dtype=torch.float64
        )
        both = torch.cat([q, k], dim=1).double()
        rq, rk = apply_rotary(both, pe).unbind(dim=1)
        return (rq * rk).reshape(heads, -1).sum(-1)

    base = score(10.0, 3.0)
    assert_close(score(40.0, 33.0), base, atol=1e-5, rtol=1e-5)
    assert (score(10.0, 4.0) - base).abs().max() > 1e-2


def test_rotation_preserves_norm_per_pair(assert_close):
    g = torch.Generator().manual_seed(5)
    points = torch.rand(1, 3, 7, generator=g) * 10
    x = torch.randn(1, 7, 48, generator=g)
    for rope_type in RopeType:
        pe = rotary_embedding(_extents(points), dim=48, heads=2, max_pos=(20, 20, 20), rope_type=rope_type)
        assert_close(apply_rotary(x, pe).norm(dim=-1), x.norm(dim=-1))


def test_layouts_differ_but_agree_on_padded_identity(assert_close):
    """Split and interleaved rotate different channel pairs; both leave the padded channels alone."""
    points = torch.full((1, 3, 1), 7.0)
    x = torch.randn(1, 1, 40)
    dim, heads = 40, 2  # 40 // 6 = 6 frequencies per axis: 18 angles -> split pads 2, interleaved pads 4
    split = apply_rotary(x, rotary_embedding(_extents(points), dim=dim, heads=heads, max_pos=(20, 20, 20)))
    inter = apply_rotary(
        x,
        rotary_embedding(_extents(points), dim=dim, heads=heads, max_pos=(20, 20, 20), rope_type=RopeType.INTERLEAVED),
    )
    assert not torch.allclose(split, inter)
    assert_close(inter[..., :4], x[..., :4])  # interleaved: leading pad channels
    assert_close(split[..., [0, 10]], x[..., [0, 10]])  # split: head 0, first pad pair


def test_midpoint_of_extent_is_used(assert_close):
    start = torch.tensor([[[1.0, 4.0]]])
    end = torch.tensor([[[3.0, 8.0]]])
    mid = (start + end) / 2
    a = rotary_embedding(torch.stack([start, end], dim=-1), dim=8, heads=1, max_pos=(20,))
    b = rotary_embedding(torch.stack([mid, mid], dim=-1), dim=8, heads=1, max_pos=(20,))
    assert_close(a.cos, b.cos)
    assert_close(a.sin, b.sin)


def test_float64_grid_is_rounded_to_float32(assert_close):
    grid64 = frequency_grid(10000.0, 3, 4096, float64=True)
    grid32 = frequency_grid(10000.0, 3, 4096, float64=False)
    assert grid64.dtype == grid32.dtype == torch.float32
    assert grid64.shape == (682,)
    want = torch.tensor(np.power(10000.0, np.linspace(0, 1, 682)) * np.pi / 2, dtype=torch.float64).float()
    assert torch.equal(grid64, want)
    assert_close(grid32, grid64, rtol=1e-5, atol=0)


def test_bad_positions_are_rejected():
    with pytest.raises(ValueError, match="axes"):
        rotary_embedding(torch.zeros(1, 2, 3, 2), dim=8, heads=1, max_pos=(20,))
    with pytest.raises(ValueError, match="even"):
        rotary_embedding(torch.zeros(1, 1, 3, 2), dim=6, heads=2, max_pos=(20,))
