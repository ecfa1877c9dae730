"""Fixtures for sampling tests: a Modality type and a fake X0 model that records its calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from ltx_core.guidance.perturbations import BatchedPerturbationConfig, PerturbationType


@dataclass(frozen=True)
class StandInModality:
    """Same fields as the transformer's Modality (used only while that package is not importable)."""

    latent: torch.Tensor
    timesteps: torch.Tensor
    sigma: torch.Tensor
    positions: torch.Tensor
    context: torch.Tensor
    context_mask: torch.Tensor | None = None
    attention_mask: torch.Tensor | None = None
    enabled: bool = True


@pytest.fixture(scope="session")
def modality_type() -> type:
    try:
        from ltx_core.model.transformer import Modality
    except ImportError:
        return StandInModality
    return Modality


# Offsets the fake model adds per skipped branch, so each pass's output is recognisable.
SKIP_OFFSETS = {
    PerturbationType.SKIP_VIDEO_SELF_ATTN: 10.0,
    PerturbationType.SKIP_AUDIO_SELF_ATTN: 20.0,
    PerturbationType.SKIP_A2V_CROSS_ATTN: 100.0,
    PerturbationType.SKIP_V2A_CROSS_ATTN: 200.0,
}


@dataclass
class FakeX0Model:
    """x0 = latent * 0.5 + mean(context) per item + offsets of the branches the item skips in block 0.

    Records every call's modalities and perturbations.
    """

    calls: list[tuple[Any, Any, BatchedPerturbationConfig | None]] = field(default_factory=list)

    @staticmethod
    def _out(modality: Any, perturbations: BatchedPerturbationConfig | None, kinds: tuple) -> torch.Tensor:
        out = modality.latent.float() * 0.5 + modality.context.float().mean(dim=(1, 2)).view(-1, 1, 1)
        if perturbations is not None:
            assert perturbations.batch_size == modality.latent.shape[0]
            for kind in kinds:
                flags = torch.tensor([float(i.skips(kind, 0)) for i in perturbations.items])
                out = out + SKIP_OFFSETS[kind] * flags.view(-1, 1, 1)
        return out.to(modality.latent.dtype)

    def __call__(self, video: Any, audio: Any, perturbations: BatchedPerturbationConfig | None):
        self.calls.append((video, audio, perturbations))
        v = (
            None
            if video is None
            else self._out(
                video,
                perturbations,
                (PerturbationType.SKIP_VIDEO_SELF_ATTN, PerturbationType.SKIP_A2V_CROSS_ATTN),
            )
        )
        a = (
            None
            if audio is None
            else self._out(
                audio,
                perturbations,
                (PerturbationType.SKIP_AUDIO_SELF_ATTN, PerturbationType.SKIP_V2A_CROSS_ATTN),
            )
        )
        return v, a


@pytest.fixture
def fake_model() -> FakeX0Model:
    return FakeX0Model()
