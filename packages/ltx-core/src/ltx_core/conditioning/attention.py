"""Self-attention masks for appended conditioning tokens.

Each appending item adds M tokens after N existing ones (the first `target` of which are the generated
grid). The (B, N+M, N+M) mask, values in [0, 1], is built block-wise:

                 target    earlier additions    new
    target       kept      kept                 cross
    earlier      kept      kept                 0
    new          cross     0                    1

"kept" is the previous mask (all ones when there was none) and `cross` the per-token attention strength
of the new tokens toward the target grid (and back). Different conditioning groups never see each other.
"""

from __future__ import annotations

import torch

from ltx_core.conditioning.item import ConditioningError
from ltx_core.types import LatentState

AttentionStrength = float | torch.Tensor


def _cross_weights(strength: AttentionStrength, batch: int, new_tokens: int, like: torch.Tensor) -> torch.Tensor:
    """Scalar, (M,), (1, M) or (B, M) -> (B, M)."""
    weights = torch.as_tensor(strength, dtype=torch.float32, device=like.device)
    if weights.dim() == 0:
        return weights.expand(batch, new_tokens).clone()
    if weights.dim() == 1:
        weights = weights.unsqueeze(0)
    if weights.dim() != 2 or weights.shape[1] != new_tokens or weights.shape[0] not in (1, batch):
        raise ConditioningError(
            f"attention strength must be a scalar, ({new_tokens},) or ({batch}, {new_tokens}); "
            f"got shape {tuple(weights.shape)}"
        )
    if bool(((weights < 0) | (weights > 1)).any()):
        raise ConditioningError("attention strength values must lie in [0, 1]")
    return weights.expand(batch, new_tokens).clone()


def extend_attention_mask(
    state: LatentState,
    target_tokens: int,
    new_tokens: int,
    strength: AttentionStrength | None,
) -> torch.Tensor | None:
    """The state's attention mask grown by `new_tokens` appended tokens (see the module docstring).

    No strength and no previous mask -> None (full attention everywhere); no strength but a previous
    mask -> the new tokens get cross weight 1 so the mask keeps matching the sequence.
    """
    if strength is None and state.attention_mask is None:
        return None
    batch, existing = state.batch_size, state.token_count
    cross = _cross_weights(1.0 if strength is None else strength, batch, new_tokens, state.latent)
    total = existing + new_tokens
    mask = torch.zeros(batch, total, total, dtype=torch.float32, device=state.latent.device)
    mask[:, :existing, :existing] = 1.0 if state.attention_mask is None else state.attention_mask.float()
    mask[:, existing:, existing:] = 1.0
    mask[:, :target_tokens, existing:] = cross.unsqueeze(1)
    mask[:, existing:, :target_tokens] = cross.unsqueeze(2)
    return mask
