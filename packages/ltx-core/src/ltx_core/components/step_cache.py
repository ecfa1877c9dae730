"""Step caching for many-step guided sampling: reuse the deep blocks' residual where it barely changes.

First-Block-Cache (as in diffusers / ParaAttention and ComfyUI's LTX nodes): every call runs the first
transformer block; when its residual r1 = block_0(h) - h changed little since the last fully computed
call with the same inputs' shapes and perturbations,

    mean |r1 - r1_prev| / mean |r1_prev| < threshold      (per stream, the largest of video and audio)

the other blocks are skipped and their residual R = h_N - h_1 from that call is added instead:
h_N ~ block_0(h) + R_prev. The output layers always run. r1_prev is only refreshed by full calls, so
consecutive reuses are all measured against the same computed step and the drift stays bounded by
the threshold. The denoised latent then deviates from the uncached run: larger thresholds reuse more
(`benchmarks/step_cache_guided.py` measures calls saved against deviation on the golden guided runs).

Wrap the transformer of one sampling run (a fresh wrapper per stage)::

    x0_model = X0Model(StepCachedTransformer(transformer, threshold=0.05))

Meant for the guided pipelines' 30-40 step stages; the distilled 8 + 3 steps change too much per step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.model.transformer import LTXModel, Modality
from ltx_core.model.transformer.block import StreamState

logger = logging.getLogger(__name__)


@dataclass
class StepCacheStats:
    """Calls made through the wrapper, and how many of them reused the deep residual."""

    calls: int = 0
    reused: int = 0
    changes: list[float] = field(default_factory=list)  # the measured first-block change per call

    @property
    def saved_fraction(self) -> float:
        """Fraction of the blocks' work saved, about (a reused call still runs block 0 and the output)."""
        return self.reused / self.calls if self.calls else 0.0


@dataclass
class _Entry:
    first: tuple[torch.Tensor | None, torch.Tensor | None]  # block 0's residual per stream
    rest: tuple[torch.Tensor | None, torch.Tensor | None]  # blocks 1..N's residual per stream


def _relative_change(now: torch.Tensor | None, before: torch.Tensor | None) -> float:
    if now is None or before is None:
        return 0.0
    scale = before.float().abs().mean()
    return float((now.float() - before.float()).abs().mean() / scale.clamp(min=1e-12))


class StepCachedTransformer(nn.Module):
    """`LTXModel`'s call signature, with First-Block-Cache over successive calls (see the module doc)."""

    def __init__(self, model: LTXModel, threshold: float) -> None:
        super().__init__()
        if not threshold > 0:
            raise ValueError(f"step cache threshold must be > 0 (e.g. 0.05), got {threshold}")
        if getattr(model, "block_streamer", None) is not None:
            raise ValueError("step caching skips blocks, which block streaming (--offload) streams in order; use one")
        if model.num_blocks < 2:
            raise ValueError(f"step caching needs a transformer of at least 2 blocks, this one has {model.num_blocks}")
        self.model = model
        self.threshold = threshold
        self.stats = StepCacheStats()
        self._entries: dict[tuple, _Entry] = {}

    @property
    def num_blocks(self) -> int:
        return self.model.num_blocks

    def reset(self) -> None:
        self._entries.clear()
        self.stats = StepCacheStats()

    @staticmethod
    def _key(vs: StreamState | None, aus: StreamState | None, perturbations: BatchedPerturbationConfig | None):
        # Calls of one step that differ in batch layout or perturbations (guidance passes run in
        # chunks) each have their own entry.
        shapes = tuple(None if s is None else (tuple(s.x.shape), s.enabled) for s in (vs, aus))
        return shapes, None if perturbations is None else perturbations.items

    def forward(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        model = self.model
        vs, aus = model.prepare_streams(video, audio, perturbations)
        inputs = (vs, aus)
        vs, aus = model.run_blocks(vs, aus, perturbations, range(1))
        first = tuple(None if s is None else s.x - i.x for s, i in zip((vs, aus), inputs))
        key = self._key(vs, aus, perturbations)
        entry = self._entries.get(key)
        self.stats.calls += 1
        if entry is not None:
            change = max(_relative_change(f, e) for f, e in zip(first, entry.first))
            self.stats.changes.append(change)
            if change < self.threshold:
                self.stats.reused += 1
                vs, aus = (None if s is None else replace(s, x=s.x + r) for s, r in zip((vs, aus), entry.rest))
                return model.output_streams(vs, aus)
        after_first = (vs, aus)
        vs, aus = model.run_blocks(vs, aus, perturbations, range(1, model.num_blocks))
        rest = tuple(None if s is None else s.x - a.x for s, a in zip((vs, aus), after_first))
        self._entries[key] = _Entry(first, rest)
        return model.output_streams(vs, aus)
