"""Checkpoint files: names, pruning, the training-state file and the settings fingerprint.

`checkpoints/{lora|model}_weights_step_{NNNNN}.safetensors` holds the weights; beside it
`training_state_step_{NNNNN}.pt` holds the step, the scheduler and (with `save_training_state: full`)
the optimizer, the raw adapter weights and the RNG states, plus a fingerprint of the settings a resume
must share. State files are written to a temporary name and renamed, and read with `weights_only=True`.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import torch

from ltx_pipelines.media.atomic_files import atomic_output

STEP_PATTERN = re.compile(r"_step_(\d+)\.(safetensors|pt)$")


class ResumeError(RuntimeError):
    """A checkpoint that cannot be resumed with the current settings."""


def weights_name(kind: str, step: int) -> str:
    return f"{kind}_weights_step_{step:05d}.safetensors"


def state_name(step: int) -> str:
    return f"training_state_step_{step:05d}.pt"


def step_of(path: Path) -> int | None:
    match = STEP_PATTERN.search(path.name)
    return int(match.group(1)) if match else None


def latest_weights(folder: Path) -> Path | None:
    found = [(step_of(p), p) for p in folder.glob("*_weights_step_*.safetensors")]
    found = [(s, p) for s, p in found if s is not None]
    return max(found)[1] if found else None


def resolve_load_checkpoint(path: Path) -> Path:
    """A weights file as given, or the latest `*_weights_step_*` in a folder (or its checkpoints/)."""
    if path.is_file():
        return path
    for folder in (path, path / "checkpoints"):
        found = latest_weights(folder) if folder.is_dir() else None
        if found is not None:
            return found
    raise ResumeError(f"model.load_checkpoint {str(path)!r} holds no *_weights_step_NNNNN.safetensors file")


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def save_state(path: Path, state: dict[str, Any]) -> None:
    with atomic_output(path, overwrite=True) as tmp:
        torch.save(state, tmp)


def load_state(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file
        raise ResumeError(f"training state {str(path)!r} cannot be read ({exc}); set checkpoints.no_resume") from exc


def prune(folder: Path, keep_last_n: int) -> None:
    """Keep the newest `keep_last_n` steps' weights and states (-1 = all)."""
    if keep_last_n < 0:
        return
    steps = sorted({s for p in folder.glob("*_step_*") if (s := step_of(p)) is not None})
    for old in steps[:-keep_last_n] if keep_last_n else steps:
        for p in folder.glob(f"*_step_{old:05d}.*"):
            p.unlink()
