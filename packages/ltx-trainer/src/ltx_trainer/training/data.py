"""Training samples from `.precomputed/`, and the order they are visited in.

A sample is usable when a file with its name exists in every source folder the strategy reads (see
docs/data.md); others are skipped and counted. The order is a function of (seed, epoch) only: epoch e
is `randperm(n)` from a generator seeded with seed + e, cut into global batches of
batch_size * world_size (a short last batch is dropped), and rank r takes the r-th slice of each global
batch. So a run can resume at any step without stored iterator state, and two processes with batch b
see exactly the samples one process with batch 2b sees.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, Sampler, default_collate

from ltx_trainer.config import FlexibleStrategyConfig
from ltx_trainer.preprocessing.precomputed import (
    CONDITIONS,
    HAS_AUDIO,
    DataFileError,
    find_samples,
    load_sample,
    require_tensors,
)

__all__ = ["DataFileError"]

logger = logging.getLogger(__name__)

_LEGACY_PROMPT_KEY = "prompt_embeds"


class PrecomputedTrainingData(Dataset):
    """Item i -> {source folder: {tensor name: tensor}} for the i-th usable sample (sorted by name)."""

    def __init__(
        self,
        root: str | Path,
        sources: Sequence[str],
        required: Mapping[str, Sequence[str]] | None = None,
        *,
        require_audio_in: str | None = None,
    ) -> None:
        """`required`: tensor names each source's files must hold (checked as each file is read).
        `require_audio_in`: a source folder whose samples must have audio (`has_audio` not False);
        samples from clips without an audio track are left out when audio is all they would train."""
        self.root = Path(root)
        self.sources = list(sources)
        self.required = {k: tuple(v) for k, v in (required or {}).items()}
        if not self.sources:
            raise ValueError("no data sources to read")
        names: set[Path] | None = None
        suffixes: dict[tuple[str, Path], Path] = {}
        for source in self.sources:
            folder = self.root / source
            found = set()
            for path in find_samples(folder):
                key = path.relative_to(folder).with_suffix("")
                found.add(key)
                suffixes[(source, key)] = path
            names = found if names is None else names & found
            if not found:
                raise ValueError(f"{str(folder)!r} holds no sample files (.safetensors / .pt)")
        self.keys = sorted(names or ())
        if require_audio_in is not None:
            silent = [k for k in self.keys if not _has_audio(suffixes[(require_audio_in, k)])]
            if silent:
                logger.warning(
                    "%d sample(s) come from clips without an audio track and only audio is trained: left out (%s)",
                    len(silent), ", ".join(str(k) for k in silent[:5]) + (", ..." if len(silent) > 5 else ""),
                )  # fmt: skip
                self.keys = [k for k in self.keys if k not in set(silent)]
        self._paths = {(s, k): suffixes[(s, k)] for s in self.sources for k in self.keys}
        if not self.keys:
            raise ValueError(
                f"no sample is present in every source folder {self.sources} under {str(self.root)!r} "
                "(files are matched by their relative name)"
            )
        total = max(len([k for (s, k) in suffixes if s == source]) for source in self.sources)
        if total > len(self.keys):
            logger.info(
                "%d samples are usable; %d are missing from some source", len(self.keys), total - len(self.keys)
            )

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> dict[str, dict[str, torch.Tensor]]:
        key = self.keys[index]
        item: dict[str, dict[str, torch.Tensor]] = {}
        for source in self.sources:
            path = self._paths[(source, key)]
            sample = load_sample(path)
            require_tensors(path, sample, self.required.get(source, ()))
            tensors = dict(sample.tensors)
            if source == CONDITIONS:
                tensors = _text_tensors(path, tensors)
            item[source] = tensors
        return item

    def sample_files(self, index: int) -> dict[str, Path]:
        """Sample `index`'s file in each source folder, by folder."""
        return {source: self._paths[(source, self.keys[index])] for source in self.sources}

    def non_finite_tensors(self, index: int) -> dict[Path, list[str]]:
        """The files of sample `index` holding NaN or infinite values, with the names of those tensors."""
        found: dict[Path, list[str]] = {}
        for path in self.sample_files(index).values():
            tensors = load_sample(path).tensors
            bad = [n for n, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
            if bad:
                found[path] = sorted(bad)
        return found

    def text_features(self, index: int) -> dict[str, torch.Tensor]:
        """Sample `index`'s conditions/ tensors alone (the prompt features), without its latents."""
        if CONDITIONS not in self.sources:
            raise ValueError(f"the data sources {self.sources} hold no {CONDITIONS!r} folder")
        path = self._paths[(CONDITIONS, self.keys[index])]
        return _text_tensors(path, dict(load_sample(path).tensors))


def _text_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if "video_prompt_embeds" not in tensors and _LEGACY_PROMPT_KEY in tensors:
        tensors["video_prompt_embeds"] = tensors.pop(_LEGACY_PROMPT_KEY)
    if "video_prompt_embeds" not in tensors or "prompt_attention_mask" not in tensors:
        raise DataFileError.about(
            path, f"a conditions/ file lacks video_prompt_embeds / prompt_attention_mask (has {sorted(tensors)})"
        )
    return tensors


def audio_only_source(strategy: FlexibleStrategyConfig) -> str | None:
    """The audio latents folder when audio is the only generated modality (a sample from a clip without an
    audio track has nothing to train there), else None (such samples train the video)."""
    audio, video = strategy.audio, strategy.video
    if audio is None or not audio.is_generated or (video is not None and video.is_generated):
        return None
    return audio.latents_dir


def _has_audio(path: Path) -> bool:
    tensors = load_sample(path).tensors
    return bool(tensors[HAS_AUDIO]) if HAS_AUDIO in tensors else True


# Per-sample flags that only some files carry, and their value for the files without them.
_FLAG_DEFAULTS = {HAS_AUDIO: True}


def collate(items: list[dict[str, dict[str, torch.Tensor]]]) -> dict[str, dict[str, torch.Tensor]]:
    for source in items[0]:
        for flag, default in _FLAG_DEFAULTS.items():
            if any(flag in item[source] for item in items):
                for item in items:
                    item[source].setdefault(flag, torch.tensor(default))
    try:
        return default_collate(items)
    except RuntimeError as exc:
        raise ValueError(
            f"samples of one batch have different shapes ({exc}); use batch_size 1 with several resolution buckets"
        ) from None


@dataclass(frozen=True)
class BatchOrder:
    num_samples: int
    batch_size: int
    seed: int
    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        if self.batches_per_epoch == 0:
            raise ValueError(
                f"the dataset has {self.num_samples} samples, fewer than one global batch "
                f"({self.batch_size} x {self.world_size} processes); lower optimization.batch_size"
            )

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size

    @property
    def batches_per_epoch(self) -> int:
        return self.num_samples // self.global_batch

    def indices(self, micro_step: int) -> list[int]:
        """This rank's sample indices for the given micro-step (counted from the start of training)."""
        epoch, position = divmod(micro_step, self.batches_per_epoch)
        order = torch.randperm(self.num_samples, generator=torch.Generator().manual_seed(self.seed + epoch))
        start = position * self.global_batch + self.rank * self.batch_size
        return order[start : start + self.batch_size].tolist()

    def global_indices(self, micro_step: int) -> list[int]:
        epoch, position = divmod(micro_step, self.batches_per_epoch)
        order = torch.randperm(self.num_samples, generator=torch.Generator().manual_seed(self.seed + epoch))
        return order[position * self.global_batch : (position + 1) * self.global_batch].tolist()


class StepBatchSampler(Sampler[list[int]]):
    """This rank's sample indices for micro-step `start`, `start + 1`, ... (endless; the loop decides when to stop)."""

    def __init__(self, order: BatchOrder, start_micro_step: int) -> None:
        self.order = order
        self.start = start_micro_step

    def __iter__(self) -> Iterator[list[int]]:
        step = self.start
        while True:
            yield self.order.indices(step)
            step += 1


def batch_loader(
    dataset: PrecomputedTrainingData, order: BatchOrder, start_micro_step: int, num_workers: int
) -> DataLoader:
    """Batches from `start_micro_step` on; `num_workers` processes read the files ahead of the loop."""
    return DataLoader(
        dataset,
        batch_sampler=StepBatchSampler(order, start_micro_step),
        collate_fn=collate,
        num_workers=num_workers,
        persistent_workers=False,
        # Each iterator draws its workers' base seed from this generator: without one it would take a draw
        # from torch's global generator, which a resumed run starts in another state.
        generator=torch.Generator().manual_seed(order.seed + start_micro_step),
    )
