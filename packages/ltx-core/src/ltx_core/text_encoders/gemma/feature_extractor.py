"""Gemma hidden states -> per-modality text features (the input of the embeddings connectors).

All L hidden states (embedding output first) are stacked as (B, S, H, L) and flattened per token to
H * L features, index h * L + l. Padded tokens are zeroed.

- V1 (LTX-2): each sample's layer l is range-normalised over its valid tokens and all H channels,
  8 * (x - mean) / (max - min + 1e-6), then one bias-free linear H * L -> H feeds both modalities.
- V2 (LTX-2.3): each token's layer vector is RMS-normalised over H, scaled by sqrt(out_dim / H), and
  projected by a separate linear layer (with bias) per modality to that stream's width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

_EPS = 1e-6
_RANGE_SCALE = 8.0


def stack_hidden_states(hidden_states: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """L tensors (B, S, H) -> (B, S, H, L); a (L, B, S, H) tensor is accepted too."""
    if isinstance(hidden_states, torch.Tensor):
        if hidden_states.ndim != 4:
            raise ValueError(f"stacked hidden states must be (L, B, S, H), got {tuple(hidden_states.shape)}")
        return hidden_states.permute(1, 2, 3, 0)
    if not hidden_states:
        raise ValueError("no hidden states given")
    shapes = {tuple(h.shape) for h in hidden_states}
    if len(shapes) != 1 or len(next(iter(shapes))) != 3:
        raise ValueError(f"hidden states must all be (B, S, H) of one shape, got {sorted(shapes)}")
    return torch.stack(list(hidden_states), dim=-1)


def range_normalized_features(stacked: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """V1 normalisation: (B, S, H, L) -> (B, S, H * L), per sample and layer, over valid tokens."""
    b, s, h, layers = stacked.shape
    keep = valid.bool()[:, :, None, None]
    count = (valid.sum(dim=-1) * h).view(b, 1, 1, 1)
    mean = stacked.masked_fill(~keep, 0.0).sum(dim=(1, 2), keepdim=True) / (count + _EPS)
    low = stacked.masked_fill(~keep, float("inf")).amin(dim=(1, 2), keepdim=True)
    high = stacked.masked_fill(~keep, float("-inf")).amax(dim=(1, 2), keepdim=True)
    normed = _RANGE_SCALE * (stacked - mean) / (high - low + _EPS)
    return normed.reshape(b, s, h * layers).masked_fill(~keep[:, :, :, 0], 0.0)


def token_rms_features(stacked: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """V2 normalisation: (B, S, H, L) -> (B, S, H * L), each token's layer vector RMS-normalised over H."""
    b, s, h, layers = stacked.shape
    normed = stacked * torch.rsqrt(torch.mean(stacked**2, dim=2, keepdim=True) + _EPS)
    normed = normed.reshape(b, s, h * layers)
    return torch.where(valid.bool()[:, :, None], normed, torch.zeros_like(normed))


class FeatureExtractorV1(nn.Module):
    """LTX-2: range normalisation and one shared projection to the Gemma width."""

    def __init__(self, hidden_size: int, num_hidden_states: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_hidden_states = num_hidden_states
        self.aggregate_embed = nn.Linear(hidden_size * num_hidden_states, hidden_size, bias=False)

    @property
    def video_dim(self) -> int:
        return self.hidden_size

    @property
    def audio_dim(self) -> int:
        return self.hidden_size

    def forward(self, stacked: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.aggregate_embed(range_normalized_features(stacked, valid).to(stacked.dtype))
        return features, features


class FeatureExtractorV2(nn.Module):
    """LTX-2.3: per-token RMS normalisation and one projection (with bias) per modality."""

    def __init__(self, hidden_size: int, num_hidden_states: int, video_dim: int, audio_dim: int | None) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_hidden_states = num_hidden_states
        flat = hidden_size * num_hidden_states
        self.video_aggregate_embed = nn.Linear(flat, video_dim)
        self.audio_aggregate_embed = nn.Linear(flat, audio_dim) if audio_dim is not None else None

    @property
    def video_dim(self) -> int:
        return self.video_aggregate_embed.out_features

    @property
    def audio_dim(self) -> int | None:
        return None if self.audio_aggregate_embed is None else self.audio_aggregate_embed.out_features

    def _project(self, normed: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
        # Keeps the features' scale independent of the output width.
        return layer(normed * math.sqrt(layer.out_features / self.hidden_size))

    def forward(self, stacked: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        normed = token_rms_features(stacked, valid).to(stacked.dtype)
        video = self._project(normed, self.video_aggregate_embed)
        audio = None if self.audio_aggregate_embed is None else self._project(normed, self.audio_aggregate_embed)
        return video, audio
