"""Starting a run from `model.load_checkpoint`: the weights, and (unless `checkpoints.no_resume`) the step,
schedule, optimizer, adapters and RNG state saved beside them, refused when the settings differ."""

from __future__ import annotations

import logging

import torch
from safetensors import safe_open

from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
from ltx_trainer.training import checkpoints as ckpt
from ltx_trainer.training.hooks import settings_fingerprint
from ltx_trainer.training.lora_files import adapter_state_from_file, load_adapter_state, lora_scale
from ltx_trainer.training.parts import TrainingParts

logger = logging.getLogger(__name__)


def load_start(parts: TrainingParts) -> int:
    """Load `model.load_checkpoint` (if set) into the parts; return the step to continue from."""
    cfg = parts.config
    if cfg.model.load_checkpoint is None:
        return 0
    weights = ckpt.resolve_load_checkpoint(cfg.model.load_checkpoint)
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
    step = ckpt.step_of(weights)
    state_path = weights.parent / ckpt.state_name(step) if step is not None else None
    if state_path is None or not state_path.is_file():
        raise ckpt.ResumeError(
            f"no training state beside {str(weights)!r} (expected {ckpt.state_name(step or 0)}); "
            "set checkpoints.no_resume: true to start from step 0 with these weights"
        )
    state = ckpt.load_state(state_path)
    want = ckpt.fingerprint(settings_fingerprint(parts))
    if state.get("config_fingerprint") != want:
        raise ckpt.ResumeError(
            f"{str(state_path)!r} was written with different settings (optimizer, schedule, LoRA, batch, "
            "strategy, data or process count); resume with the same settings, or set "
            "checkpoints.no_resume: true to start from step 0 with these weights"
        )
    start = int(state["global_step"])
    if start >= cfg.optimization.steps:
        raise ckpt.ResumeError(
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
