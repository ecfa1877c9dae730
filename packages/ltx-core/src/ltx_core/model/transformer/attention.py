"""Multi-head attention with RMS q/k norm, rotary positions, per-head gates and per-item skipping."""

from __future__ import annotations

import torch
from torch import nn

from ltx_core.model.transformer.attention_backends import AttentionFn, attend, with_kernel_choices
from ltx_core.model.transformer.rope import RotaryEmbedding, apply_rotary
from ltx_core.tune.norm import rms_norm


class RMSNorm(nn.RMSNorm):
    """`nn.RMSNorm` that also takes an input of another dtype than its weight, as under bf16 autocast over
    float32 weights (training on the CPU): normalised in float32 and returned in the input's dtype. That is
    what torch's unfused fallback computes (bit for bit), without its warning on every call. Otherwise on the
    CPU, the path the model's kernel choices time fastest (`ltx_core.tune.norm`)."""

    kernel_choices = None

    def use_kernel_choices(self, choices) -> None:
        self.kernel_choices = choices

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is None or self.weight.dtype == x.dtype:
            return rms_norm(x, self.eps, self.weight, self.kernel_choices)
        normed = nn.functional.rms_norm(x.float(), self.normalized_shape, self.weight.float(), self.eps)
        return normed.to(x.dtype)


class Attention(nn.Module):
    """Attention from `query_dim` tokens to `context_dim` tokens through `heads` x `head_dim` channels.

    q/k are RMS-normalised over the whole inner dim (learned weight) before rotation. With
    `gated`, each head's output is scaled by 2 * sigmoid(gate logits of the query input).
    `skip` is a per-item (B, 1, 1) keep mask: 0 replaces that item's attention output by its value
    projection (the keys and queries are then irrelevant), as attention perturbations require;
    `skip_all=True` skips computing queries and keys for the whole batch. The owning model's kernel
    choices (`use_kernel_choices`) pick SDPA's CPU kernel.
    """

    kernel_choices = None

    def __init__(
        self,
        query_dim: int,
        heads: int,
        head_dim: int,
        context_dim: int | None = None,
        gated: bool = False,
        norm_eps: float = 1e-6,
        attention_fn: AttentionFn = attend,
    ) -> None:
        super().__init__()
        inner = heads * head_dim
        context_dim = query_dim if context_dim is None else context_dim
        self.heads = heads
        self.head_dim = head_dim
        self.attention_fn = attention_fn
        self.q_norm = RMSNorm(inner, eps=norm_eps)
        self.k_norm = RMSNorm(inner, eps=norm_eps)
        self.to_q = nn.Linear(query_dim, inner)
        self.to_k = nn.Linear(context_dim, inner)
        self.to_v = nn.Linear(context_dim, inner)
        self.to_gate_logits = nn.Linear(query_dim, heads) if gated else None
        self.to_out = nn.Sequential(nn.Linear(inner, query_dim), nn.Identity())

    def use_kernel_choices(self, choices) -> None:
        self.kernel_choices = choices
        self.attention_fn = with_kernel_choices(self.attention_fn, choices)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        *,
        pe: RotaryEmbedding | None = None,
        k_pe: RotaryEmbedding | None = None,
        mask: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
        skip_all: bool = False,
    ) -> torch.Tensor:
        context = x if context is None else context
        v = self.to_v(context)
        if skip_all:
            out = v
        else:
            q = self.q_norm(self.to_q(x))
            k = self.k_norm(self.to_k(context))
            if pe is not None:
                q = apply_rotary(q, pe)
                k = apply_rotary(k, pe if k_pe is None else k_pe)
            out = self.attention_fn(q, k, v, self.heads, mask)
            if keep is not None:
                out = out * keep + v * (1 - keep)
        if self.to_gate_logits is not None:
            gates = 2.0 * torch.sigmoid(self.to_gate_logits(x))  # (B, T, heads)
            b, t, _ = out.shape
            out = (out.view(b, t, self.heads, self.head_dim) * gates.unsqueeze(-1)).view(b, t, -1)
        return self.to_out(out)
