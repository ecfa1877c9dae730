"""Verify a `.precomputed/` folder against its dataset file and the models (phase 7 of the train-model skill).

Usage: python .claude/skills/train-model/scripts/check_precomputed.py PRECOMPUTED --dataset DATASET
       [--model-path MODEL] [--text-encoder-path GEMMA]
Prints one line per source folder and every problem; exits 1 when there is any problem.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.dataset_file import DatasetFileError, read_dataset, relative_media_key, resolve_roles


def _same_path(recorded: object, given: Path) -> bool:
    if recorded is None:
        return False
    path = Path(str(recorded)).expanduser()
    # A relative path was relative to wherever preprocessing ran, which is unknown here: compare names.
    return path.resolve() == given.expanduser().resolve() if path.is_absolute() else path.name == given.name


def check(root: Path, dataset_path: Path, model: Path | None, gemma: Path | None) -> tuple[list[str], list[str]]:
    """(report lines, problems)."""
    report: list[str] = []
    problems: list[str] = []
    manifest = pc.read_manifest(root)
    if manifest is None:
        problems.append(f"{root / pc.MANIFEST} is missing (preprocessing did not finish)")
    else:
        for key, given in (("model_path", model), ("text_encoder_path", gemma)):
            if given is not None and not _same_path(manifest.get(key), given):
                problems.append(f"preprocessing.json {key} is {manifest.get(key)!r}, not {str(given)!r}")
    dataset = read_dataset(dataset_path)
    roles = resolve_roles(dataset.columns)
    main_column = roles.get("video") or roles.get("audio")
    if main_column is None:
        raise DatasetFileError(f"{dataset_path} has neither a video nor an audio column")
    keys = [relative_media_key(dataset, row.get(main_column) or "") for row in dataset.rows]
    present = [source for source in pc.SOURCES if (root / source).is_dir()]
    if not present:
        problems.append(f"no source folder under {root}")
    for source in present:
        missing = [k for k in keys if not pc.sample_path(root, source, k).is_file()]
        files = len(pc.find_samples(root / source))
        report.append(f"{source}/: {files} files, {len(missing)} of {len(keys)} rows missing")
        problems += [f"{source}/: no sample for {k}" for k in missing]
    if pc.AUDIO_LATENTS in present or "audio" in roles:
        audio_files = pc.find_samples(root / pc.AUDIO_LATENTS)
        if not audio_files:
            problems.append("audio gate: audio_latents/ is empty")
        silent = 0
        for path in audio_files:
            tensors = pc.load_sample(path).tensors
            latents = tensors.get("latents")
            if latents is None or latents.numel() == 0 or not torch.isfinite(latents).all():
                problems.append(f"audio gate: {path} has no finite, non-empty latents")
            silent += int(pc.HAS_AUDIO in tensors and not bool(tensors[pc.HAS_AUDIO]))
        if audio_files:
            report.append(f"{pc.AUDIO_LATENTS}/: {silent} from clips without an audio track (trained video-only)")
    return report, problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check_precomputed.py", description=__doc__.splitlines()[0])
    parser.add_argument("precomputed", type=Path, help="the .precomputed folder")
    parser.add_argument("--dataset", type=Path, required=True, help="the dataset file it was made from")
    parser.add_argument("--model-path", type=Path, default=None, help="the checkpoint it must have been made with")
    parser.add_argument("--text-encoder-path", type=Path, default=None, help="the Gemma folder it must match")
    args = parser.parse_args(argv)
    if not args.precomputed.is_dir():
        parser.error(f"{str(args.precomputed)!r} is not a folder")
    try:
        report, problems = check(args.precomputed, args.dataset, args.model_path, args.text_encoder_path)
    except DatasetFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report))
    for problem in problems:
        print(f"problem: {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
