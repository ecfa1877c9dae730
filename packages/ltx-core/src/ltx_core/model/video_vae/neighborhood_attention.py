"""3-D neighborhood attention (NATTEN's `na3d` semantics) in plain PyTorch, plus optional natten.

Every query at (t, h, w) attends to a window of kernel_t x kernel_h x kernel_w keys. Along each
axis of length L with odd kernel k the window starts at clamp(i - k // 2, 0, L - k): near a border
the window is shifted inward rather than cropped, so every query always sees exactly k keys per
axis (this is why the decoder refuses volumes smaller than the kernel).

Tensors are (B, T, H, W, heads, head_dim); queries arrive already scaled (softmax(q . k) v).

Backends (all compute the same thing):
  * `gather`  - gathers each query's k_t*k_h*k_w keys and values, processed in bounded slabs along
    T. Simple, exact, any device; memory ~ 2 * tokens * window * head_dim per slab.
  * `blocked` - splits the queries into blocks; a block attends to the union of its windows (the
    block grown by kernel - 1 per axis) under a window mask through one
    `scaled_dot_product_attention`, and blocks with the same mask geometry are stacked into one call.
    More arithmetic than `gather` but in large matmuls: the faster eager path (see
    benchmarks/diffusion_vae_decode.py).
  * `natten`  - `natten.na3d` (the optional `natten` extra), used on CUDA when importable.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F

logger = logging.getLogger(__name__)

Kernel = tuple[int, int, int]
NAFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Kernel], torch.Tensor]

# Elements of the gathered keys of one `gather` slab (bounds its working memory).
_GATHER_SLAB_ELEMENTS = 1 << 24
# Query block (t, h, w) of the `blocked` path; the key block is this plus kernel - 1 per axis.
DEFAULT_QUERY_BLOCK: Kernel = (1, 8, 8)
# Stacked query blocks per SDPA call of the `blocked` path (bounds the score matrix it materialises).
_BLOCKED_SCORE_ELEMENTS = 1 << 24


def check_volume(shape: tuple[int, ...], kernel: Kernel) -> None:
    """Refuse kernels that NATTEN refuses: even sizes, or a volume smaller than the kernel on any axis."""
    if any(k < 1 or k % 2 == 0 for k in kernel):
        raise ValueError(f"neighborhood attention kernel sizes must be odd and >= 1, got {kernel}")
    if len(shape) != 6:
        raise ValueError(f"neighborhood attention expects (B, T, H, W, heads, head_dim), got {tuple(shape)}")
    dims = tuple(shape[1:4])
    if any(d < k for d, k in zip(dims, kernel)):
        raise ValueError(f"neighborhood attention needs (T, H, W) >= kernel {kernel}, got {dims}")


def window_starts(length: int, kernel: int, device: torch.device | None = None) -> torch.Tensor:
    """First key index of each query's window along one axis (windows shifted inward at borders)."""
    i = torch.arange(length, device=device)
    return (i - kernel // 2).clamp(0, length - kernel)


def na3d_gather(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: Kernel) -> torch.Tensor:
    """Neighborhood attention by explicit gathering of every window (the reference-exact eager path)."""
    check_volume(tuple(q.shape), kernel)
    batch, t_len, h_len, w_len, heads, dim = q.shape
    kt, kh, kw = kernel
    window = kt * kh * kw
    dev = q.device
    idx_t = window_starts(t_len, kt, dev)[:, None] + torch.arange(kt, device=dev)
    idx_h = window_starts(h_len, kh, dev)[:, None] + torch.arange(kh, device=dev)
    idx_w = window_starts(w_len, kw, dev)[:, None] + torch.arange(kw, device=dev)
    per_row = batch * h_len * w_len * window * heads * dim
    slab = max(1, min(t_len, _GATHER_SLAB_ELEMENTS // max(1, per_row)))
    out = torch.empty_like(v)

    def neighbours(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        # (B, T, H, W, n, d) -> (B, t, H, W, n, window, d) for the query rows `rows`.
        g = x[:, rows]  # B t kt H W n d
        g = g[:, :, :, idx_h]  # B t kt H kh W n d
        g = g[:, :, :, :, :, idx_w]  # B t kt H kh W kw n d
        g = g.permute(0, 1, 3, 5, 7, 2, 4, 6, 8)  # B t H W n kt kh kw d
        return g.reshape(batch, rows.shape[0], h_len, w_len, heads, window, dim)

    for t0 in range(0, t_len, slab):
        rows = idx_t[t0 : t0 + slab]
        keys = neighbours(k, rows)
        scores = torch.matmul(q[:, t0 : t0 + slab].unsqueeze(-2), keys.transpose(-1, -2))
        del keys
        # Half-precision scores are normalised in float32 (as SDPA does).
        probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(v.dtype)
        out[:, t0 : t0 + slab] = torch.matmul(probs, neighbours(v, rows)).squeeze(-2)
    return out


@dataclass(frozen=True)
class _AxisBlock:
    queries: slice
    keys: slice
    mask: torch.Tensor  # (queries, keys) bool: key inside the query's window


def _axis_blocks(length: int, kernel: int, block: int) -> list[_AxisBlock]:
    starts = window_starts(length, kernel).tolist()
    blocks = []
    for q0 in range(0, length, block):
        q1 = min(length, q0 + block)
        k0, k1 = starts[q0], starts[q1 - 1] + kernel
        rel = torch.tensor(starts[q0:q1]) - k0
        cols = torch.arange(k1 - k0)
        mask = (cols[None, :] >= rel[:, None]) & (cols[None, :] < rel[:, None] + kernel)
        blocks.append(_AxisBlock(slice(q0, q1), slice(k0, k1), mask))
    return blocks


def na3d_blocked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: Kernel, query_block: Kernel = DEFAULT_QUERY_BLOCK
) -> torch.Tensor:
    """Neighborhood attention as masked attention of query blocks over their key neighbourhoods."""
    check_volume(tuple(q.shape), kernel)
    batch, t_len, h_len, w_len, heads, dim = q.shape
    axes = [_axis_blocks(n, kn, max(1, b)) for n, kn, b in zip((t_len, h_len, w_len), kernel, query_block)]
    # Blocks whose three axis masks are equal (every interior block) share one SDPA call.
    groups: dict[tuple[bytes, ...], list[tuple[_AxisBlock, ...]]] = {}
    for combo in itertools.product(*axes):
        key = tuple(b.mask.numpy().tobytes() + bytes(b.mask.shape) for b in combo)
        groups.setdefault(key, []).append(combo)

    out = torch.empty_like(v)
    for combos in groups.values():
        bt, bh, bw = combos[0]
        nq = bt.mask.shape[0] * bh.mask.shape[0] * bw.mask.shape[0]
        nk = bt.mask.shape[1] * bh.mask.shape[1] * bw.mask.shape[1]
        visible = (
            bt.mask[:, None, None, :, None, None]
            & bh.mask[None, :, None, None, :, None]
            & bw.mask[None, None, :, None, None, :]
        ).reshape(nq, nk)
        visible = visible.to(q.device)
        per_call = max(1, _BLOCKED_SCORE_ELEMENTS // max(1, batch * heads * nq * nk))
        for c0 in range(0, len(combos), per_call):
            chunk = combos[c0 : c0 + per_call]

            def stack(x: torch.Tensor, which: str, n: int, chunk=chunk) -> torch.Tensor:
                parts = [x[:, getattr(a, which), getattr(b, which), getattr(c, which)] for a, b, c in chunk]
                s = torch.stack(parts)  # G B t h w heads d
                return s.permute(0, 1, 5, 2, 3, 4, 6).reshape(len(chunk) * batch, heads, n, dim)

            o = F.scaled_dot_product_attention(
                stack(q, "queries", nq), stack(k, "keys", nk), stack(v, "keys", nk), attn_mask=visible, scale=1.0
            )
            tq, hq, wq = bt.mask.shape[0], bh.mask.shape[0], bw.mask.shape[0]
            o = o.reshape(len(chunk), batch, heads, tq, hq, wq, dim).permute(0, 1, 3, 4, 5, 2, 6)
            for i, (a, b, c) in enumerate(chunk):
                out[:, a.queries, b.queries, c.queries] = o[i]
    return out


@functools.cache
def _natten_na3d() -> Callable[..., torch.Tensor] | None:
    """`natten.na3d` when the optional natten package (>= 0.20, fused API) is importable."""
    try:
        natten = importlib.import_module("natten")
    except Exception:  # a broken natten build must not break decoding
        return None
    fn = getattr(natten, "na3d", None)
    return fn if callable(fn) else None


def _natten(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: Kernel) -> torch.Tensor:
    fn = _natten_na3d()
    if fn is None:
        raise RuntimeError("the natten backend was chosen but natten.na3d is not importable")
    check_volume(tuple(q.shape), kernel)
    return fn(q.contiguous(), k.contiguous(), v.to(q.dtype).contiguous(), kernel_size=kernel, scale=1.0)


@dataclass(frozen=True)
class NABackend:
    """A named neighborhood-attention implementation."""

    name: str
    fn: NAFunction

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: Kernel) -> torch.Tensor:
        return self.fn(q, k, v, kernel)


BACKENDS: dict[str, NAFunction] = {"gather": na3d_gather, "blocked": na3d_blocked, "natten": _natten}


def natten_available() -> bool:
    return _natten_na3d() is not None


def choose_backend(device: torch.device, requested: str = "auto") -> NABackend:
    """`auto`: natten on CUDA when installed, else the blocked eager path. Logs the choice."""
    if requested not in (*BACKENDS, "auto"):
        raise ValueError(f"unknown neighborhood attention backend {requested!r}; accepted: auto, {', '.join(BACKENDS)}")
    name = requested
    if requested == "auto":
        name = "natten" if device.type == "cuda" and natten_available() else "blocked"
    elif name == "natten" and not natten_available():
        raise ValueError("neighborhood attention backend 'natten' needs the optional natten package (extra 'natten')")
    logger.info("diffusion VAE decoder: neighborhood attention backend %r on %s", name, device.type)
    return NABackend(name, BACKENDS[name])
