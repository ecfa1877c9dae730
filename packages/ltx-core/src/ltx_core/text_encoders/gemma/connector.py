"""The 1-D embeddings connector: a small pre-norm transformer over the text features of one modality.

Input rows are right-padded (valid tokens first). Padded slots are replaced by learnable registers
(slot i takes register i mod R, so the sequence length must be a multiple of R) and become ordinary,
attendable tokens; the connector then runs pre-RMS-norm self-attention with 1-D RoPE over positions
0..S-1 and a GELU(tanh) MLP per layer, and RMS-normalises the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ltx_core.model.transformer.attention import Attention
from ltx_core.model.transformer.feed_forward import FeedForward
from ltx_core.model.transformer.rope import RopeType, RotaryEmbedding, rotary_embedding

_NORM_EPS = 1e-6


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return nn.functional.rms_norm(x, (x.shape[-1],), eps=_NORM_EPS)


@dataclass(frozen=True)
class ConnectorConfig:
    heads: int = 30
    head_dim: int = 128
    num_layers: int = 2
    max_pos: tuple[int, ...] = (1,)
    num_registers: int = 128  # 0 keeps padded slots masked instead
    gated_attention: bool = False
    ff_bias: bool = True
    rope_type: RopeType = RopeType.SPLIT
    float64_frequencies: bool = False
    rope_theta: float = 10000.0

    @property
    def dim(self) -> int:
        return self.heads * self.head_dim


class ConnectorBlock(nn.Module):
    def __init__(self, config: ConnectorConfig) -> None:
        super().__init__()
        self.attn1 = Attention(config.dim, config.heads, config.head_dim, gated=config.gated_attention)
        self.ff = FeedForward(config.dim, bias=config.ff_bias)

    def forward(self, x: torch.Tensor, pe: RotaryEmbedding, bias: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn1(_rms_norm(x), pe=pe, mask=bias)
        return x + self.ff(_rms_norm(x))


class EmbeddingsConnector(nn.Module):
    def __init__(self, config: ConnectorConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer_1d_blocks = nn.ModuleList(ConnectorBlock(config) for _ in range(config.num_layers))
        if config.num_registers:
            self.learnable_registers = nn.Parameter(torch.zeros(config.num_registers, config.dim))

    def forward(self, features: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """features (B, S, D) right-padded, valid (B, S) -> (encoded (B, S, D), output mask (B, S) int64)."""
        c = self.config
        b, s, d = features.shape
        if d != c.dim:
            raise ValueError(f"connector expects {c.dim}-wide features, got {d}")
        valid = valid.bool()
        bias = None
        if c.num_registers:
            if s % c.num_registers:
                raise ValueError(
                    f"text sequence length {s} must be a multiple of the {c.num_registers} learnable registers"
                )
            registers = self.learnable_registers.to(features.dtype).repeat(s // c.num_registers, 1)
            x = torch.where(valid[:, :, None], features, registers[None])
            out_mask = torch.ones(b, s, dtype=torch.int64, device=features.device)
        else:
            x = features
            finfo = torch.finfo(features.dtype)
            bias = torch.where(valid, 0.0, -finfo.max).to(features.dtype)[:, None, None, :]
            out_mask = valid.to(torch.int64)
        positions = torch.arange(s, dtype=torch.float32, device=features.device)[None, None, :].expand(b, 1, s)
        pe = rotary_embedding(
            positions, dim=c.dim, heads=c.heads, max_pos=c.max_pos, theta=c.rope_theta, rope_type=c.rope_type,
            float64_grid=c.float64_frequencies, use_midpoint=False, dtype=features.dtype,
        )  # fmt: skip
        for block in self.transformer_1d_blocks:
            x = block(x, pe, bias)
        return _rms_norm(x), out_mask
