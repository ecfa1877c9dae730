"""What the loop does between steps: save a checkpoint, sample validation media, report progress.

Each hook is a function of the run's parts; the loop in `Trainer.train` decides when to call them.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ltx_core.loader import read_checkpoint_config, read_safetensors_header
from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
from ltx_core.write_errors import is_disk_full
from ltx_pipelines.io.atomic_files import apply_umask
from ltx_trainer.training import checkpoints as ckpt
from ltx_trainer.training.lora_files import adapter_state, save_lora_file
from ltx_trainer.training.parts import TrainingParts
from ltx_trainer.training.step import StepRecord
from ltx_trainer.training.validation import ValidationRunner

logger = logging.getLogger(__name__)
# The progress lines keep the loop's logger name: log filters (and the tests) select them by it.
progress_logger = logging.getLogger("ltx_trainer.training.trainer")


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
        "config_fingerprint": ckpt.fingerprint(settings_fingerprint(parts)),
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
        path = folder / ckpt.weights_name("lora", step)

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
        path = folder / ckpt.weights_name("model", step)

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
        ckpt.write_checkpoint(path, write, _training_state(parts, step))
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        kept = ckpt.latest_complete(folder)
        raise CheckpointWriteError(
            f"no space left on the device while saving checkpoint step {step} to {str(folder)!r}; nothing of step "
            f"{step} was kept (newest complete checkpoint: {kept.name if kept else 'none'}). Free space, then resume "
            f"with model.load_checkpoint: {str(folder)!r}"
        ) from None
    ckpt.prune(folder, cfg.checkpoints.keep_last_n)
    logger.info("saved %s", path)
    return path


def validate(parts: TrainingParts, runner: ValidationRunner, step: int) -> list[Path]:
    """Generate the validation samples with the current adapters (main process; the others wait)."""
    written: list[Path] = []
    if parts.is_main:
        lora = parts.config.lora
        assert lora is not None
        model = parts.unwrapped
        offload = parts.config.acceleration.offload_optimizer_during_validation and parts.device.type == "cuda"
        if offload:
            _move_optimizer_state(parts.optimizer, torch.device("cpu"))
        strategy = parts.config.training_strategy
        in_memory = runner.streams_fit(strategy.video is not None, strategy.audio is not None)
        meta = strategy_metadata(parts)
        was_training = model.training
        model.eval()
        try:
            written = runner.run(
                step,
                model.get_base_model() if in_memory else None,
                parts.base_dtype,
                lambda path: save_lora_file(path, model, lora.rank, lora.alpha, torch.float32, meta),
            )
        finally:
            model.train(was_training)
            if offload:
                _move_optimizer_state(parts.optimizer, parts.device)
    parts.accelerator.wait_for_everyone()
    return written


def report(parts: TrainingParts, record: StepRecord, total: int, bar: tqdm, log_every: int | None) -> None:
    """The progress bar, or (`log_every` set) one parseable line every `log_every` steps, the first and last."""
    if not parts.is_main:
        return
    if log_every is not None:
        if record.step % log_every == 0 or record.step == total or record.step == 1:
            progress_logger.info(
                "step %d/%d loss %.6f lr %.3e step_time %.3fs peak_mem %.1fMB",
                record.step, total, record.loss, record.lr, record.step_time, record.peak_memory_mb,
            )  # fmt: skip
    else:
        bar.set_postfix(loss=f"{record.loss:.4f}", lr=f"{record.lr:.2e}")
        bar.update(1)


def _move_optimizer_state(optimizer, device: torch.device) -> None:
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                state[key] = value.to(device, non_blocking=True)
