"""The LTX-2.5 duration head: how long a shot a prompt describes, from the text contexts.

    h   = [W_v c_v + e_v ; W_a c_a + e_a]          project each context stream, tag its modality
    p   = MHA(q, h, h)                             `num_queries` learned queries pool every token
    s   = exp(W_2 gelu_tanh(W_1 flatten(p)))       seconds (the head is trained on log-seconds)

No attention mask: the connectors replace padding with learned registers, so every context token
is a valid one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class DurationHeadConfig:
    video_dim: int = 4096
    audio_dim: int = 2048
    pooler_hidden_dim: int = 256
    num_queries: int = 1
    num_pooler_heads: int = 4
    mlp_hidden: int = 256

    @classmethod
    def from_checkpoint_config(cls, config: dict[str, Any]) -> DurationHeadConfig:
        """From a file's whole `config`: context widths from its `transformer` section, the head's own
        sizes from `duration_head` (absent entries take the released defaults)."""
        transformer = config.get("transformer") or {}
        head = config.get("duration_head") or {}
        values = cls(
            video_dim=int(transformer.get("cross_attention_dim", cls.video_dim)),
            audio_dim=int(transformer.get("audio_cross_attention_dim", cls.audio_dim)),
            pooler_hidden_dim=int(head.get("pooler_hidden_dim", cls.pooler_hidden_dim)),
            num_queries=int(head.get("num_queries", cls.num_queries)),
            num_pooler_heads=int(head.get("num_pooler_heads", cls.num_pooler_heads)),
            mlp_hidden=int(head.get("mlp_hidden", cls.mlp_hidden)),
        )
        if values.pooler_hidden_dim % values.num_pooler_heads:
            raise ValueError(
                f"duration_head.pooler_hidden_dim {values.pooler_hidden_dim} is not divisible by "
                f"num_pooler_heads {values.num_pooler_heads}"
            )
        return values


class AttentionPooler(nn.Module):
    """`num_queries` learned tokens cross-attending to a token sequence: (B, T, D) -> (B, Q, D)."""

    def __init__(self, dim: int, num_queries: int, heads: int) -> None:
        super().__init__()
        self.query_tokens = nn.Parameter(torch.zeros(num_queries, dim))
        self.cross_attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        queries = self.query_tokens.unsqueeze(0).expand(tokens.shape[0], -1, -1)
        pooled, _ = self.cross_attn(queries, tokens, tokens, need_weights=False)
        return pooled


class DurationHead(nn.Module):
    def __init__(self, config: DurationHeadConfig) -> None:
        super().__init__()
        self.config = config
        d = config.pooler_hidden_dim
        self.video_input_proj = nn.Linear(config.video_dim, d)
        self.video_modality_emb = nn.Parameter(torch.zeros(d))
        self.audio_input_proj = nn.Linear(config.audio_dim, d)
        self.audio_modality_emb = nn.Parameter(torch.zeros(d))
        self.attention_pooler = AttentionPooler(d, config.num_queries, config.num_pooler_heads)
        self.mlp_hidden = nn.Linear(d * config.num_queries, config.mlp_hidden)
        self.mlp_out = nn.Linear(config.mlp_hidden, 1)

    def forward(self, video: torch.Tensor | None = None, audio: torch.Tensor | None = None) -> torch.Tensor:
        """Seconds, (B,), from the video (B, T, video_dim) and/or audio (B, T, audio_dim) contexts."""
        if video is None and audio is None:
            raise ValueError("the duration head needs the video context, the audio context, or both")
        parts = []
        if video is not None:
            parts.append(self.video_input_proj(video) + self.video_modality_emb)
        if audio is not None:
            parts.append(self.audio_input_proj(audio) + self.audio_modality_emb)
        pooled = self.attention_pooler(torch.cat(parts, dim=1))
        hidden = F.gelu(self.mlp_hidden(pooled.flatten(1)), approximate="tanh")
        return self.mlp_out(hidden).squeeze(-1).exp()
