"""Building blocks of the LTX-2.5 diffusion video decoder, all channels-last (B, T, H, W, C).

Neighborhood-attention block (stages 1-4):
    x <- x + Proj(NA(RoPE(RMS(Q) / sqrt(d)), RoPE(RMS(K)), V))   on RMSNorm(x)
    x <- x + W_down(SiLU(W_gate y) * W_up y),  y = RMSNorm(x)
Diffusion block (stage 5), AdaLN-modulated by the decode timestep and fed the stage-4 context:
    x <- x + ContextProj(context)
    x <- x + Attn(RMSNorm(x) * (1 + scale_msa) + shift_msa)
    x <- x + MLP(RMSNorm(x) * (1 + scale_mlp) + shift_mlp)
The file's static residual gates (`gate_msa`, `gate_mlp`, `gate_ctx`) are folded into Proj, W_down and
ContextProj on load, so the blocks have no gates. RoPE is absolute over the volume's local positions;
inside a neighborhood window that equals relative RoPE (the global phase cancels in q . k), so a tile
decoded alone needs no position offset.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ltx_core.model.transformer.adaln import timestep_sinusoid
from ltx_core.model.video_vae.diffusion_config import Triple, default_rope_split
from ltx_core.model.video_vae.neighborhood_attention import NABackend

ROPE_BASE = 10000.0
NORM_EPS = 1e-6
# AdaLN rows in the file: scale/shift/gate for attention, for the MLP, and a context gate; the gates
# are static (folded into weights), so only rows 0, 1, 3, 4 modulate.
ADALN_ROWS = 7
_SCALE_MSA, _SHIFT_MSA, _SCALE_MLP, _SHIFT_MLP = 0, 1, 3, 4


def mlp_hidden(dim: int, ratio: float = 4.0) -> int:
    """Hidden width of the SwiGLU MLP: `ratio * dim` rounded up to a multiple of 16."""
    return (int(dim * ratio) + 15) // 16 * 16


def _rotate_axis(x: torch.Tensor, axis: int, pos: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate adjacent channel pairs of `x` (B, T, H, W, heads, d) by position along `axis` (1..3)
    (positions 0, 1, ... unless given)."""
    d = x.shape[-1]
    inv_freq = (1.0 / ROPE_BASE ** (torch.arange(0, d, 2, dtype=torch.float64) / d)).float().to(x.device)
    if pos is None:
        pos = torch.arange(x.shape[axis], dtype=torch.float32, device=x.device)
    shape = [1] * 6
    shape[axis] = x.shape[axis]
    shape[-1] = d // 2
    angle = (pos[:, None] * inv_freq[None, :]).reshape(shape)
    cos, sin = angle.cos(), angle.sin()
    pairs = x.float().reshape(*x.shape[:-1], d // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.reshape(x.shape).to(x.dtype)


def apply_rope_3d(x: torch.Tensor, split: Triple, w_positions: torch.Tensor | None = None) -> torch.Tensor:
    """Absolute 3-D RoPE: the head's first `split[0]` channels rotate with time, then height, then width."""
    d_t, d_h, _ = split
    return torch.cat(
        [
            _rotate_axis(x[..., :d_t], 1),
            _rotate_axis(x[..., d_t : d_t + d_h], 2),
            _rotate_axis(x[..., d_t + d_h :], 3, w_positions),
        ],
        dim=-1,
    )


class NeighborhoodAttention3D(nn.Module):
    """Multi-head 3-D neighborhood attention with QK RMSNorm and absolute RoPE (fused qkv as stored)."""

    def __init__(self, dim: int, kernel: Triple, head_dim: int) -> None:
        super().__init__()
        self.dim, self.head_dim, self.heads = dim, head_dim, dim // head_dim
        self.kernel = kernel
        self.rope_split = default_rope_split(head_dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.q_norm = nn.RMSNorm(head_dim, eps=NORM_EPS)
        self.k_norm = nn.RMSNorm(head_dim, eps=NORM_EPS)

    def forward(self, x: torch.Tensor, na: NABackend, w_positions: torch.Tensor | None = None) -> torch.Tensor:
        b, t, h, w, _ = x.shape
        q, k, v = (p.reshape(b, t, h, w, self.heads, self.head_dim) for p in self.qkv(x).chunk(3, dim=-1))
        q = apply_rope_3d(self.q_norm(q) * self.head_dim**-0.5, self.rope_split, w_positions)
        k = apply_rope_3d(self.k_norm(k), self.rope_split, w_positions)
        out = na(q, k, v.contiguous(), self.kernel)
        return self.proj(out.reshape(b, t, h, w, self.dim))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w_up = nn.Linear(dim, hidden, bias=False)
        self.w_gate = nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class NABlock(nn.Module):
    """Pre-norm neighborhood-attention block of the deterministic stages."""

    def __init__(self, dim: int, kernel: Triple, head_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(dim, eps=NORM_EPS)
        self.attn = NeighborhoodAttention3D(dim, kernel, head_dim)
        self.norm2 = nn.RMSNorm(dim, eps=NORM_EPS)
        self.mlp = SwiGLU(dim, mlp_hidden(dim))

    def forward(self, x: torch.Tensor, na: NABackend) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), na)
        return x + self.mlp(self.norm2(x))


class DiffusionNABlock(nn.Module):
    """Stage-5 block: adds the projected context, then AdaLN-modulated attention and MLP."""

    def __init__(self, dim: int, kernel: Triple, context_channels: int, head_dim: int) -> None:
        super().__init__()
        self.context_proj = nn.Linear(context_channels, dim)
        self.scale_shift_table = nn.Parameter(torch.zeros(ADALN_ROWS, dim))
        self.norm1 = nn.RMSNorm(dim, eps=NORM_EPS)
        self.attn = NeighborhoodAttention3D(dim, kernel, head_dim)
        self.norm2 = nn.RMSNorm(dim, eps=NORM_EPS)
        self.mlp = SwiGLU(dim, mlp_hidden(dim))

    def forward(
        self, x: torch.Tensor, context: torch.Tensor, modulation: torch.Tensor, na: NABackend, w_chunks: int = 1
    ) -> torch.Tensor:
        """`modulation`: (B, 7, C) shared AdaLN rows; this block adds its own table to them.

        `w_chunks` > 1 runs the attention residual in width slabs (see `width_slabs`)."""
        rows = (modulation + self.scale_shift_table.to(modulation)[None])[:, :, None, None, None, :]
        x = x + self.context_proj(context)
        scale, shift = rows[:, _SCALE_MSA], rows[:, _SHIFT_MSA]
        if w_chunks <= 1:
            x = x + self.attn(self.norm1(x) * (1.0 + scale) + shift, na)
        else:
            update = torch.zeros_like(x)
            for core, slab, positions, halo in width_slabs(x, w_chunks, self.attn.kernel[2] // 2):
                out = self.attn(self.norm1(slab) * (1.0 + scale) + shift, na, positions)
                update[:, :, :, core] = out[:, :, :, halo : halo + core.stop - core.start]
            x = x + update
        return x + self.mlp(self.norm2(x) * (1.0 + rows[:, _SCALE_MLP]) + rows[:, _SHIFT_MLP])


def width_slabs(x: torch.Tensor, chunks: int, halo: int) -> list[tuple[slice, torch.Tensor, torch.Tensor, int]]:
    """The reference's W-chunked stage-5 attention input: `chunks` slabs of ceil(W / chunks) columns,
    each widened by `halo` columns per side - the neighbours' columns where they exist, else copies of
    the slab's edge column. Returns (core columns, slab, the slab's W positions, halo) per slab.

    Unlike plain neighborhood attention, whose windows shift inward at the volume's W edges, a slab's
    windows are always centred: edge queries attend to replicated columns (at positions -1, W, ...).
    """
    width = x.shape[3]
    chunk = -(-width // chunks)
    extent = chunk + 2 * halo
    slabs = []
    for i in range(chunks):
        start, stop = i * chunk, min(width, (i + 1) * chunk)
        if stop <= start:
            continue
        core = stop - start
        left = x[:, :, :, start - min(halo, chunk) : start] if i else x[:, :, :, :0]
        right = x[:, :, :, stop : min(width, stop + halo)] if i + 1 < chunks else x[:, :, :, stop:stop]
        edge_l, edge_r = x[:, :, :, start : start + 1], x[:, :, :, stop - 1 : stop]
        # Missing slots repeat the slab's own edge column (also right of a short neighbour strip); on the
        # left only at the volume edge - slabs narrower than the halo leave zeros there, as the reference.
        lead = halo - left.shape[3]
        fill_l = (
            edge_l.expand(*x.shape[:3], lead, x.shape[4]) if i == 0 else x.new_zeros(*x.shape[:3], lead, x.shape[4])
        )
        fill_r = edge_r.expand(*x.shape[:3], extent - halo - core - right.shape[3], x.shape[4])
        slab = torch.cat([fill_l, left, x[:, :, :, start:stop], right, fill_r], dim=3)
        positions = torch.arange(extent, dtype=torch.float32, device=x.device) + (start - halo)
        slabs.append((slice(start, stop), slab, positions, halo))
    return slabs


class PixelShuffleUpsample(nn.Module):
    """Linear channel expansion, then depth-to-space by `stride` (time, height, width).

    A temporal stride of 2 makes frame 0 twice; the copy is dropped for the chunk holding the true
    first frame (`drop_leading_frame`), which keeps the causal 1 + 2(n - 1) frame count. Chunks that
    start later have no such duplicate.
    """

    def __init__(self, in_channels: int, stride: Triple, reduction: int) -> None:
        super().__init__()
        self.stride = stride
        self.out_channels = in_channels // reduction
        self.proj = nn.Linear(in_channels, math.prod(stride) * self.out_channels)

    def forward(self, x: torch.Tensor, drop_leading_frame: bool = True) -> torch.Tensor:
        b, t, h, w, _ = x.shape
        st, sh, sw = self.stride
        x = self.proj(x).reshape(b, t, h, w, self.out_channels, st, sh, sw)
        x = x.permute(0, 1, 5, 2, 6, 3, 7, 4).reshape(b, t * st, h * sh, w * sw, self.out_channels)
        if st == 2 and drop_leading_frame:
            x = x[:, 1:]
        return x


class TimestepMLP(nn.Module):
    """256 sinusoidal features of the scaled timestep -> Linear -> SiLU -> Linear (`mlp.0` / `mlp.2` as stored)."""

    def __init__(self, dim: int, frequency_features: int = 256) -> None:
        super().__init__()
        self.frequency_features = frequency_features
        self.mlp = nn.Sequential(nn.Linear(frequency_features, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, timesteps: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self.mlp(timestep_sinusoid(timesteps, self.frequency_features).to(dtype))


class SharedAdaLN(nn.Module):
    """Timestep embedding -> the 7 modulation rows shared by every stage-5 block."""

    def __init__(self, dim: int, t_emb_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(t_emb_dim, ADALN_ROWS * dim)

    def forward(self, t_emb: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(t_emb)).reshape(t_emb.shape[0], ADALN_ROWS, -1)
