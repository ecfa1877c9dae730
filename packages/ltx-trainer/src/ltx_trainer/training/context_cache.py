"""Text contexts computed once per sample: the frozen connectors' output for fixed precomputed features.

A sample's prompt features never change during training and the connectors are frozen, so their output
for that sample is the same at every step. `CachedTextContexts` runs the connectors for the samples of a
batch it has not seen, keeps each sample's row (in host memory, within a byte budget), and builds the
batch's contexts from the kept rows afterwards. A row is kept exactly as computed, so the loss is the
one the uncached step gives.

`precompute` runs the connectors over every sample of the dataset before the first step; when every row
fits the budget the cache lets the connectors go, so the training loop never holds them (on the 22B they
are about 2 billion parameters, 4 GB in bf16).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import torch

from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_trainer.training.text_contexts import TextConnectors

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_BYTES = 2 * 2**30


def contexts_bytes_per_sample(tokens: int, video_dim: int, audio_dim: int, element_size: int = 4) -> int:
    """Host bytes one kept sample takes (video and audio context rows plus the int64 mask)."""
    return tokens * ((video_dim + audio_dim) * element_size + 8)


class CachedTextContexts:
    """`connectors(video_features, audio_features, mask)` per batch, each sample computed once.

    `budget_bytes` bounds the host memory the kept rows take; samples met after it is spent are
    computed every time (logged once). Rows are kept on the CPU and moved to the step's device.
    """

    def __init__(self, connectors: TextConnectors, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        if budget_bytes < 0:
            raise ValueError(f"the text context cache budget must be >= 0 bytes, got {budget_bytes}")
        self.connectors: TextConnectors | None = connectors
        self.budget_bytes = budget_bytes
        self.used_bytes = 0
        self._rows: dict[int, tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]] = {}
        self._full_logged = False

    def __len__(self) -> int:
        return len(self._rows)

    def __call__(
        self,
        video_features: torch.Tensor,
        audio_features: torch.Tensor | None,
        attention_mask: torch.Tensor,
        sample_ids: Sequence[int],
    ) -> TextContexts:
        if len(sample_ids) != video_features.shape[0]:
            raise ValueError(f"{len(sample_ids)} sample ids for a batch of {video_features.shape[0]}")
        device = video_features.device
        rows = [self._rows.get(int(i)) for i in sample_ids]
        tokens = attention_mask.shape[1]
        if all(r is not None and r[2].shape[0] == tokens for r in rows):
            video, audio, mask = zip(*rows)  # type: ignore[misc]
            return TextContexts(
                video=torch.stack(video).to(device),
                audio=None if audio[0] is None else torch.stack(audio).to(device),
                mask=torch.stack(mask).to(device),
            )
        if self.connectors is None:
            missing = [int(i) for i, r in zip(sample_ids, rows, strict=True) if r is None or r[2].shape[0] != tokens]
            raise RuntimeError(f"no text contexts were kept for samples {missing}, and the connectors were released")
        with torch.no_grad():
            contexts = self.connectors(video_features, audio_features, attention_mask)
        self._keep(contexts, sample_ids)
        return contexts

    def precompute(
        self, samples: Iterable[tuple[int, torch.Tensor, torch.Tensor | None, torch.Tensor]], count: int
    ) -> bool:
        """Keep the rows of all `count` samples, given as (sample id, video features, audio features, mask)
        with a batch axis of 1; True when all were kept, and then the connectors are released (dropped from
        the cache, freed once no one else holds them). Stops at the first sample over the budget."""
        if self.connectors is None:
            raise RuntimeError("the connectors were released; precompute runs once, before training")
        for sample, video, audio, mask in samples:
            if int(sample) not in self._rows:
                self(video, audio, mask, [sample])
            if int(sample) not in self._rows:  # over the budget: the loop runs the connectors for the rest
                return False
        if len(self._rows) < count:
            return False
        self.connectors = None
        mib = self.used_bytes / 2**20
        logger.info("text contexts of all %d samples kept (%.0f MiB): connectors released", count, mib)
        return True

    def _keep(self, contexts: TextContexts, sample_ids: Sequence[int]) -> None:
        for row, sample in enumerate(sample_ids):
            if int(sample) in self._rows:
                continue
            kept = (
                contexts.video[row].detach().to("cpu", copy=True),
                None if contexts.audio is None else contexts.audio[row].detach().to("cpu", copy=True),
                contexts.mask[row].detach().to("cpu", copy=True),
            )
            size = sum(t.numel() * t.element_size() for t in kept if t is not None)
            if self.used_bytes + size > self.budget_bytes:
                if not self._full_logged:
                    logger.info(
                        "text context cache full (%d samples, %.0f MiB): further samples run the connectors each step",
                        len(self._rows),
                        self.used_bytes / 2**20,
                    )
                    self._full_logged = True
                continue
            self._rows[int(sample)] = kept
            self.used_bytes += size
