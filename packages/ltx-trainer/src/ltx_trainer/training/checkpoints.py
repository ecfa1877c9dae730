"""Checkpoint files: names, pruning, the training-state file and the settings fingerprint.

`checkpoints/{lora|model}_weights_step_{NNNNN}.safetensors` holds the weights; beside it
`training_state_step_{NNNNN}.pt` holds the step, the scheduler and (with `save_training_state: full`)
the optimizer, the raw adapter weights and the RNG states, plus a fingerprint of the settings a resume
must share. State files are read with `weights_only=True`.

A checkpoint is one unit: both files are written in full to hidden temporary names first, then the state
is renamed into place and the weights last. The weights file is the commit point, so a step whose
weights exist is complete, whatever interrupts the save (a kill, a signal, a full disk). Folders written
before this order (weights first) may hold weights without their state after an interruption: when
other steps have states, such a step is incomplete and resuming takes the newest complete one instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ltx_pipelines.io.atomic_files import partial_file, publish_file, remove_stale_partials

logger = logging.getLogger(__name__)

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


def _weights_by_step(folder: Path) -> dict[int, Path]:
    found = {}
    for p in folder.glob("*_weights_step_*.safetensors") if folder.is_dir() else ():
        step = step_of(p)
        if step is not None and not p.name.startswith("."):
            found[step] = p
    return found


def _state_steps(folder: Path) -> set[int]:
    return {s for p in folder.glob("training_state_step_*.pt") if (s := step_of(p)) is not None}


def latest_weights(folder: Path) -> Path | None:
    """The newest weights file, complete or not (what makes a folder "hold checkpoints")."""
    found = _weights_by_step(folder)
    return found[max(found)] if found else None


def latest_complete(folder: Path) -> Path | None:
    """The weights file of the newest complete checkpoint: its state beside it, or no states at all in the
    folder (a run with `save_training_state: off`)."""
    weights, states = _weights_by_step(folder), _state_steps(folder)
    for step in sorted(weights, reverse=True):
        if step in states or not states:
            return weights[step]
    return None


def resolve_load_checkpoint(path: Path) -> Path:
    """A weights file as given, or the newest complete checkpoint in a folder (or its checkpoints/)."""
    if path.is_file():
        return path
    for folder in (path, path / "checkpoints"):
        found = latest_complete(folder) if folder.is_dir() else None
        if found is not None:
            newest = latest_weights(folder)
            if newest is not None and newest != found:
                logger.warning("%s has no training state (an interrupted save); resuming from %s", newest, found)
            return found
    raise ResumeError(f"model.load_checkpoint {str(path)!r} holds no *_weights_step_NNNNN.safetensors file")


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove what interrupted saves left in `folder`: temporary files whose writer is gone, and states
    whose weights were never published. Only while this run holds the output folder's lock."""
    removed = remove_stale_partials(folder, min_age_s=0.0)
    weights = _weights_by_step(folder)
    for step in sorted(_state_steps(folder) - set(weights)):
        path = folder / state_name(step)
        path.unlink(missing_ok=True)
        logger.warning("removed %s, the state of a checkpoint whose save was interrupted", path)
        removed.append(path)
    return removed


def write_checkpoint(weights_path: Path, write_weights: Callable[[Path], object], state: dict[str, Any] | None) -> Path:
    """Write a checkpoint as one unit (see the module docstring): `write_weights(tmp)` fills the weights
    file's temporary, `state` (None: no state file) is saved beside it; nothing is published until both
    are complete, and the weights are published last."""
    step = step_of(weights_path)
    assert step is not None, weights_path
    state_path = weights_path.parent / state_name(step)
    with partial_file(weights_path) as weights_tmp:
        write_weights(weights_tmp)
        if state is None:
            publish_file(weights_tmp, weights_path, overwrite=True)
            return weights_path
        with partial_file(state_path) as state_tmp:
            torch.save(state, state_tmp)
            publish_file(state_tmp, state_path, overwrite=True)
        try:
            publish_file(weights_tmp, weights_path, overwrite=True)
        except BaseException:
            state_path.unlink(missing_ok=True)  # the state alone is no checkpoint
            raise
    return weights_path


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


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
        # The weights first: a prune cut short leaves a state without weights, which is no checkpoint.
        for p in sorted(folder.glob(f"*_step_{old:05d}.*"), key=lambda p: p.suffix != ".safetensors"):
            p.unlink()
