"""The per-row loop every preprocessing stage shares: this rank's shard, a progress bar, skip-existing."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ltx_pipelines.io.progress import progress
from ltx_trainer.preprocessing.dataset_file import DatasetFile, DatasetRow, relative_media_key
from ltx_trainer.preprocessing.sharding import Shard, current_shard


@dataclass(frozen=True)
class RowItem:
    row: DatasetRow
    column: str
    """The column `value` came from."""
    value: str
    """The cell being processed (a media path or a caption)."""
    key: Path
    """The sample's name under `.precomputed/` (the main media path relative to the dataset folder)."""


Columns = str | Sequence[str]


def _first(row: DatasetRow, columns: Columns) -> tuple[str, str] | None:
    for column in (columns,) if isinstance(columns, str) else columns:
        value = row.get(column)
        if value is not None:
            return column, value
    return None


def shard_items(
    dataset: DatasetFile, column: Columns, *, key_column: Columns | None = None, shard: Shard | None = None
) -> list[RowItem]:
    """This rank's rows that have a value in `column` (the first of several that has one), named after
    `key_column` (likewise; default: the value's own column)."""
    shard = shard or current_shard()
    items: list[RowItem] = []
    for row in dataset.rows:
        found = _first(row, column)
        keyed = _first(row, key_column) if key_column is not None else found
        if found is None or keyed is None:
            continue
        items.append(RowItem(row=row, column=found[0], value=found[1], key=relative_media_key(dataset, keyed[1])))
    return shard.take(items)


def rows_with(
    dataset: DatasetFile,
    column: Columns,
    *,
    key_column: Columns | None = None,
    shard: Shard | None = None,
    desc: str,
) -> Iterator[RowItem]:
    """`shard_items` behind a progress bar with counts and ETA."""
    mine = shard_items(dataset, column, key_column=key_column, shard=shard)
    yield from progress(mine, desc=desc, total=len(mine), unit="sample")


def sample_generator(seed: int, key: Path) -> torch.Generator:
    """A generator seeded by the run seed and the sample's name, so random crops do not depend on the
    order samples are processed in (a resumed or sharded run crops each sample the same way)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(str(key).encode())) % (2**63))
