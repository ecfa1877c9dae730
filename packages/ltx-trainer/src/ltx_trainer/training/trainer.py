"""The training recipe: build the parts (`build.build_parts`), then loop `step.train_step` with the hooks
(`checkpoints.save_checkpoint`, `validation.validate`, `reporting.report`, wandb) between steps.

accelerate places devices, processes and mixed precision; peft adds the LoRA adapters. One optimizer
step = `gradient_accumulation_steps` micro-batches per process; the LR schedule advances once per
optimizer step (not once per process, as the reference does under DDP).

Around the loop (main process): the output folder is locked for the run's lifetime (`run_lock`), what
interrupted saves left is removed, and SIGINT / SIGTERM stop the run between steps or right after a save
in progress (`interrupts`), raising `TrainingInterrupted`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ltx_pipelines.io.atomic_files import atomic_output, remove_stale_partials
from ltx_trainer.config import LtxTrainerConfig, dump_config
from ltx_trainer.model_files import training_model_files
from ltx_trainer.training import checkpoints as ckpt
from ltx_trainer.training.build import TrainingParts, build_parts, make_accelerator, reference_scale_from_data
from ltx_trainer.training.data import batch_loader
from ltx_trainer.training.interrupts import StopSignals, TrainingInterrupted
from ltx_trainer.training.memory_estimate import plan_run
from ltx_trainer.training.reporting import WandbLogger, push_to_hub, report
from ltx_trainer.training.run_lock import RunLock, check_unlocked
from ltx_trainer.training.step import StepRecord, TrainingDiverged, sigma_bucket_losses
from ltx_trainer.training.step import train_step as run_train_step
from ltx_trainer.training.validation import ValidationRunner, check_validation_config, validate

__all__ = [
    "StepRecord",
    "Trainer",
    "TrainingDiverged",
    "TrainingInterrupted",
    "TrainingResult",
    "reference_scale_from_data",
    "sigma_bucket_losses",
]

logger = logging.getLogger(__name__)


@dataclass
class TrainingResult:
    history: list[StepRecord]
    final_weights: Path | None
    output_dir: Path


class Trainer:
    def __init__(self, config: LtxTrainerConfig, *, disable_progress_bars: bool = False, log_every: int = 20) -> None:
        self.config = config
        self.disable_progress_bars = disable_progress_bars
        self.log_every = log_every
        self.accelerator = make_accelerator(config)
        self.output_dir = config.output_dir
        self.checkpoint_dir = self.output_dir / "checkpoints"
        if self.accelerator.is_main_process:
            check_unlocked(self.output_dir)
        self._check_output_dir()
        check_validation_config(config)
        # The model paths as one set: a text encoder other than the transformer's is refused here.
        m = config.model
        training_model_files(m.model_path, m.text_encoder_path, m.video_vae_path, m.audio_vae_path)
        # Before any weight is read: stop with the settings that would fit when this run cannot.
        # (blocks_to_swap: auto becomes the count the plan picked: memory_plan.plan_run)
        self.config = config = plan_run(config, self.accelerator.device)
        self.parts: TrainingParts = build_parts(config, self.accelerator, progress=not disable_progress_bars)
        self.validation = ValidationRunner(config, self.output_dir, self.parts.device)
        self.wandb = WandbLogger(config) if config.wandb.enabled and self.accelerator.is_main_process else None

    def _check_output_dir(self) -> None:
        """A new run must not prune or overwrite another run's checkpoints."""
        if self.config.model.load_checkpoint is not None or not self.checkpoint_dir.is_dir():
            return
        existing = ckpt.latest_weights(self.checkpoint_dir)
        if existing is not None:
            raise ValueError(
                f"output_dir {str(self.output_dir)!r} already holds checkpoints ({existing.name}); choose another "
                "output_dir, or resume that run with model.load_checkpoint"
            )

    def save_checkpoint(self, step: int) -> Path | None:
        return ckpt.save_checkpoint(self.parts, step)

    def validate(self, step: int) -> list[Path]:
        return validate(self.parts, self.validation, step)

    def _validation_due(self, done: int) -> bool:
        v = self.config.validation
        if v.interval is None or not v.samples:
            return False
        return not v.skip_initial_validation if done == 0 else done % v.interval == 0

    # -- the loop ----------------------------------------------------------------------------------
    def train(self, stop_at: int | None = None, on_step: Callable[[StepRecord], None] | None = None) -> TrainingResult:
        """Train to `optimization.steps` (or `stop_at`); `on_step` sees every step's record."""
        main = self.accelerator.is_main_process
        with RunLock(self.output_dir) if main else contextlib.nullcontext(), StopSignals() as signals:
            # Every resume check passes before anything in the output folder changes (a refused resume
            # leaves the run's recorded config and files as they were).
            start = ckpt.load_start(self.parts)
            if main:
                self._prepare_output_dir()
            return self._loop(signals, start, stop_at, on_step)

    def _loop(self, signals: StopSignals, start: int, stop_at: int | None, on_step) -> TrainingResult:
        cfg, parts = self.config, self.parts
        steps, interval = cfg.optimization.steps, cfg.checkpoints.interval
        end = min(steps, stop_at) if stop_at is not None else steps
        accum = cfg.optimization.gradient_accumulation_steps
        data = iter(batch_loader(parts.dataset, parts.order, start * accum, cfg.data.num_dataloader_workers))
        bar = tqdm(total=end, initial=start, desc="training", disable=self.disable_progress_bars or not parts.is_main)
        history: list[StepRecord] = []
        last_saved: Path | None = None
        try:
            if start == 0 and self._validation_due(0):
                self.validate(0)
            for step in range(start, end):
                record = run_train_step(parts, step, data)
                history.append(record)
                report(parts, record, end, bar, self.log_every if self.disable_progress_bars else None)
                done = record.step
                if (interval and done % interval == 0) or done == steps:
                    with signals.saving():
                        last_saved = self.save_checkpoint(done) or last_saved
                if self.wandb is not None:
                    self.wandb.log_record(record)
                if self._validation_due(done):
                    written = self.validate(done)
                    if self.wandb is not None:
                        self.wandb.log_samples(done, written)
                if on_step is not None:
                    on_step(record)
        finally:
            bar.close()
        if end == steps and parts.is_main:
            if cfg.hub.push_to_hub and last_saved is not None:
                push_to_hub(cfg, last_saved)
            if self.wandb is not None:
                self.wandb.finish()
        return TrainingResult(history=history, final_weights=last_saved, output_dir=self.output_dir)

    def _prepare_output_dir(self) -> None:
        """With the lock held: remove what interrupted runs left, and record the config."""
        ckpt.remove_leftovers(self.checkpoint_dir)
        for folder in (self.output_dir, self.output_dir / "samples"):
            remove_stale_partials(folder, min_age_s=0.0)
        with atomic_output(self.output_dir / "training_config.yaml", overwrite=True) as tmp:
            tmp.write_text(dump_config(self.config), encoding="utf-8")
