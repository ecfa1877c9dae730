"""The conditioning-item protocol: an edit of a modality's token `LatentState` before sampling."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from ltx_core.types import LatentState

ToolsT = TypeVar("ToolsT", contravariant=True)


class ConditioningError(ValueError):
    """A conditioning item does not fit the state or tools it is applied to."""


class ConditioningItem(Protocol[ToolsT]):
    """Edits a patchified state. Items that add tokens append them after every existing token, so the
    target grid stays first and `tools.clear_conditioning` can drop the additions after sampling.
    Items receive already-encoded latents; VAE encoding belongs to the pipelines."""

    def apply_to(self, state: LatentState, tools: ToolsT) -> LatentState: ...


def apply_conditionings(state: LatentState, items: Iterable[ConditioningItem], tools: object) -> LatentState:
    """Apply items in order."""
    for item in items:
        state = item.apply_to(state, tools)
    return state


def check_strength(strength: float, name: str = "strength") -> None:
    if not 0.0 <= strength <= 1.0:
        raise ConditioningError(f"{name} must be in [0, 1] (1 = keep clean, 0 = regenerate), got {strength}")
