"""Split a captioned dataset file into training rows (`dataset.json`) and held-out rows (`holdout.jsonl`).

Usage: python .claude/skills/train-model/scripts/split_holdout.py CAPTIONS --fraction 0.1 --seed 42 [--count N]
Both outputs are written beside CAPTIONS (so relative media paths keep working); existing outputs are
refused unless --overwrite.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from ltx_trainer.preprocessing.dataset_file import DatasetFileError, read_dataset, write_records

SMALL_DATASET = 10  # below this many rows the split is the user's decision, not a default


def holdout_indices(num_rows: int, *, fraction: float, seed: int, count: int | None) -> list[int]:
    """The row indices held out: `count` rows if given, else round(fraction * rows), drawn with `seed`."""
    if count is None:
        if num_rows < SMALL_DATASET:
            raise ValueError(f"only {num_rows} rows: give --count (0 to {num_rows - 1}) instead of a fraction")
        count = round(fraction * num_rows)
    if not 0 <= count < num_rows:
        raise ValueError(f"--count {count}: accepted 0 to {num_rows - 1} (at least one row must stay for training)")
    return sorted(random.Random(seed).sample(range(num_rows), count))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="split_holdout.py", description=__doc__.splitlines()[0])
    parser.add_argument("captions", type=Path, help="captioned dataset file (.json, .jsonl or .csv)")
    parser.add_argument("--fraction", type=float, default=0.1, help="share of rows held out (default 0.1)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the draw (default 42)")
    parser.add_argument("--count", type=int, default=None, help="exact number of held-out rows (small datasets)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing dataset.json / holdout.jsonl")
    args = parser.parse_args(argv)
    if not 0.0 <= args.fraction < 1.0:
        parser.error(f"--fraction {args.fraction}: accepted 0 <= fraction < 1")
    try:
        dataset = read_dataset(args.captions)
        held = set(holdout_indices(len(dataset.rows), fraction=args.fraction, seed=args.seed, count=args.count))
    except (DatasetFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    train_path, holdout_path = dataset.root / "dataset.json", dataset.root / "holdout.jsonl"
    if train_path.resolve() == args.captions.resolve():
        print("error: the input must not be named dataset.json (it is the training output)", file=sys.stderr)
        return 2
    existing = [str(p) for p in (train_path, holdout_path) if p.exists()]
    if existing and not args.overwrite:
        print(f"error: {', '.join(existing)} exist; pass --overwrite to replace them", file=sys.stderr)
        return 2
    train = [dict(row.values) for row in dataset.rows if row.index not in held]
    holdout = [dict(row.values) for row in dataset.rows if row.index in held]
    write_records(train_path, train, overwrite=True)
    write_records(holdout_path, holdout, overwrite=True)
    print(f"{len(train)} training rows -> {train_path}")
    print(f"{len(holdout)} held-out rows -> {holdout_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
