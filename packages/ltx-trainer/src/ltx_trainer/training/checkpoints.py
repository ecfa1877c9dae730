"""Checkpoints: saving a step (`save_checkpoint`), resuming from one (`load_start`), the settings fingerprint a
resume must match, and the files themselves (names, finding the newest complete one, pruning).

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
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_core.loader import read_checkpoint_config, read_safetensors_header
from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
from ltx_core.write_errors import is_disk_full
from ltx_pipelines.io.atomic_files import apply_umask, partial_file, publish_file, remove_stale_partials
from ltx_trainer.training.lora_files import (
    adapter_state,
    adapter_state_from_file,
    load_adapter_state,
    lora_scale,
    save_lora_file,
)

if TYPE_CHECKING:
    from ltx_trainer.training.build import TrainingParts

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


# -- saving a step ---------------------------------------------------------------------------------
class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full disk); nothing of that step was kept."""


def settings_fingerprint(parts: TrainingParts) -> dict[str, Any]:
    """The settings a resumed run must share with the run that saved the checkpoint."""
    cfg = parts.config
    return {
        "training_mode": cfg.model.training_mode,
        "lora": cfg.lora.model_dump() if cfg.lora else None,
        "optimizer_type": cfg.optimization.optimizer_type,
        "scheduler_type": cfg.optimization.scheduler_type,
        "scheduler_params": cfg.optimization.scheduler_params,
        "steps": cfg.optimization.steps,
        "learning_rate": cfg.optimization.learning_rate,
        "batch_size": cfg.optimization.batch_size,
        "gradient_accumulation_steps": cfg.optimization.gradient_accumulation_steps,
        "num_processes": parts.accelerator.num_processes,
        "seed": cfg.seed,
        "training_strategy": cfg.training_strategy.model_dump(mode="json"),
        "flow_matching": cfg.flow_matching.model_dump(mode="json"),
        "num_samples": len(parts.dataset),
        # Only when set, so runs saved before quantization existed keep their fingerprint.
        **({"quantization": cfg.acceleration.quantization} if cfg.acceleration.quantization else {}),
    }


def strategy_metadata(parts: TrainingParts) -> dict[str, str]:
    """The LoRA / weights file header: the training strategy and the IC-LoRA reference scale."""
    meta = {"training_strategy": json.dumps(parts.config.training_strategy.model_dump(mode="json"))}
    s = parts.reference_scale
    if s.spatial != 1:
        meta["reference_downscale_factor"] = str(s.spatial)
        meta["reference_spatial_scale_factor"] = str(s.spatial)
    if s.temporal != 1:
        meta["reference_temporal_scale_factor"] = str(s.temporal)
    return meta


def _training_state(parts: TrainingParts, step: int) -> dict[str, Any] | None:
    cfg = parts.config
    if cfg.checkpoints.save_training_state == "off":
        return None
    state: dict[str, Any] = {
        "global_step": step,
        "config_fingerprint": fingerprint(settings_fingerprint(parts)),
        "lr_scheduler_state_dict": parts.scheduler.state_dict(),
        "rng_states": {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])},
    }
    if cfg.checkpoints.save_training_state == "full":
        state["optimizer_state_dict"] = parts.optimizer.state_dict()
        if cfg.model.training_mode == "lora":
            state["adapter_state"] = {k: v.float().cpu() for k, v in adapter_state(parts.unwrapped).items()}
    return state


def save_checkpoint(parts: TrainingParts, step: int) -> Path | None:
    """Write the weights and the training state of `step` as one unit, then prune; the weights file on the
    main process, None on the others. A full disk raises `CheckpointWriteError` with nothing of `step` kept."""
    cfg = parts.config
    parts.accelerator.wait_for_everyone()
    if not parts.is_main:
        return None
    folder = parts.checkpoint_dir
    folder.mkdir(parents=True, exist_ok=True)
    dtype = torch.bfloat16 if cfg.checkpoints.precision == "bfloat16" else torch.float32
    model = parts.unwrapped
    if cfg.model.training_mode == "lora":
        lora = cfg.lora
        assert lora is not None
        path = folder / weights_name("lora", step)

        def write(tmp: Path) -> None:
            save_lora_file(
                tmp,
                model,
                lora.rank,
                lora.alpha,
                dtype,
                strategy_metadata(parts),
                cfg.checkpoints.lora_format,
                atomic=False,
            )
    else:
        path = folder / weights_name("model", step)

        def write(tmp: Path) -> None:
            tensors = {f"{TRANSFORMER_PREFIX}{k}": v.detach().to(dtype).cpu().contiguous()
                       for k, v in model.state_dict().items()}  # fmt: skip
            transformer = read_checkpoint_config(cfg.model.model_path, "transformer")
            meta = {"config": json.dumps({"transformer": transformer}), **strategy_metadata(parts)}
            # The base file's version and text-encoder pairing (LTX-2.5) go with the trained weights.
            base = read_safetensors_header(cfg.model.model_path).metadata
            for key in ("model_version", "gemma_source_checkpoint"):
                if key in base:
                    meta[key] = base[key] if isinstance(base[key], str) else json.dumps(base[key])
            save_file(tensors, str(tmp), metadata=meta)
            apply_umask(tmp)  # safetensors recreates the file private (0600)

    try:
        write_checkpoint(path, write, _training_state(parts, step))
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        kept = latest_complete(folder)
        raise CheckpointWriteError(
            f"no space left on the device while saving checkpoint step {step} to {str(folder)!r}; nothing of step "
            f"{step} was kept (newest complete checkpoint: {kept.name if kept else 'none'}). Free space, then resume "
            f"with model.load_checkpoint: {str(folder)!r}"
        ) from None
    prune(folder, cfg.checkpoints.keep_last_n)
    logger.info("saved %s", path)
    return path


# -- resuming ----------------------------------------------------------------------------------------
def load_start(parts: TrainingParts) -> int:
    """Load `model.load_checkpoint` (if set) into the parts; return the step to continue from."""
    cfg = parts.config
    if cfg.model.load_checkpoint is None:
        return 0
    weights = resolve_load_checkpoint(cfg.model.load_checkpoint)
    model = parts.unwrapped
    with safe_open(str(weights), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not a mapping
    if cfg.model.training_mode == "lora":
        lora = cfg.lora
        assert lora is not None
        load_adapter_state(model, adapter_state_from_file(tensors, lora_scale(lora.rank, lora.alpha)))
    else:
        state = {k[len(TRANSFORMER_PREFIX) :]: v for k, v in tensors.items() if k.startswith(TRANSFORMER_PREFIX)}
        model.load_state_dict(state, strict=True)
    logger.info("loaded weights from %s", weights)
    if cfg.checkpoints.no_resume:
        return 0
    step = step_of(weights)
    state_path = weights.parent / state_name(step) if step is not None else None
    if state_path is None or not state_path.is_file():
        raise ResumeError(
            f"no training state beside {str(weights)!r} (expected {state_name(step or 0)}); "
            "set checkpoints.no_resume: true to start from step 0 with these weights"
        )
    state = load_state(state_path)
    want = fingerprint(settings_fingerprint(parts))
    if state.get("config_fingerprint") != want:
        raise ResumeError(
            f"{str(state_path)!r} was written with different settings (optimizer, schedule, LoRA, batch, "
            "strategy, data or process count); resume with the same settings, or set "
            "checkpoints.no_resume: true to start from step 0 with these weights"
        )
    start = int(state["global_step"])
    if start >= cfg.optimization.steps:
        raise ResumeError(
            f"the checkpoint is at step {start}; optimization.steps ({cfg.optimization.steps}) must be larger"
        )
    parts.scheduler.load_state_dict(state["lr_scheduler_state_dict"])
    if "optimizer_state_dict" in state:
        parts.optimizer.load_state_dict(state["optimizer_state_dict"])
    if "adapter_state" in state:
        load_adapter_state(model, state["adapter_state"])
    # No training draw depends on this state (the strategy's draws and LoRA dropout are keyed by the step:
    # draws.py); it is put back for code outside the loop that may draw from the global generator.
    rng = state.get("rng_states", {})
    if "torch" in rng:
        torch.set_rng_state(rng["torch"])
    logger.info("resuming at step %d from %s", start, state_path)
    return start
