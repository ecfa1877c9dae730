"""The training loop: accelerate for devices, processes and mixed precision; peft for LoRA.

One optimizer step = `gradient_accumulation_steps` micro-batches per process; gradients are clipped,
the optimizer steps and the LR schedule advances exactly once (not once per process, as the reference
does under DDP). A non-finite loss stops the run before the optimizer step, so the weights and the last
checkpoint on disk stay good.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from ltx_core.loader import CheckpointError, build_model, read_checkpoint_config
from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER, AV_TRANSFORMER, VIDEO_ONLY_TRANSFORMER, LTXModel
from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit
from ltx_core.types import SpatioTemporalScaleFactors
from ltx_pipelines.media.atomic_files import atomic_output
from ltx_trainer.config import LtxTrainerConfig, ReferenceCondition, dump_config
from ltx_trainer.memory_plan import check_run
from ltx_trainer.training import checkpoints as ckpt
from ltx_trainer.training.context_cache import CachedTextContexts
from ltx_trainer.training.data import BatchOrder, PrecomputedTrainingData, batch_loader
from ltx_trainer.training.draws import PerSampleDraws
from ltx_trainer.training.flexible import FlexibleStrategy, ReferenceScale, strategy_loss
from ltx_trainer.training.lora_files import (
    adapter_state,
    adapter_state_from_file,
    add_lora,
    load_adapter_state,
    lora_scale,
    save_lora_file,
)
from ltx_trainer.training.lr_schedules import make_lr_scheduler
from ltx_trainer.training.quantization import (
    QuantizedTransformer,
    check_quantization_device,
    quantize_transformer,
    require_quanto,
)
from ltx_trainer.training.reporting import WandbLogger, push_to_hub
from ltx_trainer.training.text_contexts import TextConnectors, text_connectors_spec
from ltx_trainer.training.timesteps import make_sampler
from ltx_trainer.training.validation import ValidationRunner, check_validation_config

logger = logging.getLogger(__name__)

SIGMA_BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class StepRecord:
    step: int
    loss: float
    lr: float
    step_time: float
    peak_memory_mb: float
    sigma_losses: dict[str, float] = field(default_factory=dict)


@dataclass
class TrainingResult:
    history: list[StepRecord]
    final_weights: Path | None
    output_dir: Path


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024


def sigma_bucket_losses(sigma: torch.Tensor, loss: torch.Tensor) -> dict[str, float]:
    """Mean per-sample loss in each sigma quarter (`train/loss_sigma_0.00-0.25`, ...)."""
    out = {}
    for lo, hi in itertools.pairwise(SIGMA_BUCKETS):
        inside = (sigma >= lo) & ((sigma < hi) if hi < 1.0 else (sigma <= hi))
        if inside.any():
            out[f"train/loss_sigma_{lo:.2f}-{hi:.2f}"] = float(loss[inside].mean())
    return out


def _transformer_spec(config: LtxTrainerConfig):
    strategy = config.training_strategy
    if strategy.video is not None and strategy.audio is not None:
        return AV_TRANSFORMER
    return VIDEO_ONLY_TRANSFORMER if strategy.video is not None else AUDIO_ONLY_TRANSFORMER


def _video_scale(model_path: Path) -> SpatioTemporalScaleFactors:
    """The VAE's compression (time, height, width) from the checkpoint's `vae` config; 8/32/32 without one
    (a transformer-only file)."""
    from ltx_core.model.video_vae.config import VideoVAEConfig

    try:
        vae = read_checkpoint_config(model_path, "vae")
    except CheckpointError:
        return SpatioTemporalScaleFactors()
    return VideoVAEConfig.from_checkpoint_config(vae).encoder_scale


def reference_scale_from_data(root: Path, latents_dir: str) -> ReferenceScale:
    """Factors recorded by preprocessing in the reference latents' metadata (never searched for in the cwd)."""
    from ltx_trainer.precomputed import find_samples, read_manifest

    files = find_samples(root / latents_dir)
    if files and files[0].suffix == ".safetensors":
        with safe_open(str(files[0]), framework="pt") as f:
            meta = f.metadata() or {}
        if "reference_downscale_factor" in meta:
            return ReferenceScale(
                spatial=int(json.loads(meta["reference_downscale_factor"])),
                temporal=int(json.loads(meta.get("reference_temporal_scale_factor", "1"))),
            )
    manifest = read_manifest(root) or {}
    return ReferenceScale(
        spatial=int(manifest.get("reference_downscale_factor", 1)),
        temporal=int(manifest.get("reference_temporal_scale_factor", 1)),
    )


class Trainer:
    def __init__(self, config: LtxTrainerConfig, *, disable_progress_bars: bool = False, log_every: int = 20) -> None:
        self.config = config
        self.disable_progress_bars = disable_progress_bars
        self.log_every = log_every
        acc = config.acceleration
        if config.optimization.optimizer_type == "adamw8bit":
            _check_bnb()
        self.accelerator = Accelerator(
            mixed_precision=acc.mixed_precision_mode,
            cpu=not torch.cuda.is_available(),
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        )
        self.device = self.accelerator.device
        if acc.quantization is not None:
            # Before any weight is read: the extra must be installed and the type must run on this device.
            require_quanto(acc.quantization)
            check_quantization_device(acc.quantization, self.device)
        if acc.load_text_encoder_in_8bit:
            require_gemma_8bit(self.device, "acceleration.load_text_encoder_in_8bit")
            if config.validation.interval is None or not config.validation.samples:
                logger.warning("acceleration.load_text_encoder_in_8bit: no effect, validation sampling is off")
        ignored = [
            name
            for name, value in (
                ("model.video_vae_path", config.model.video_vae_path),
                ("model.audio_vae_path", config.model.audio_vae_path),
            )
            if value
        ]
        if ignored:
            # Validation runs the pipelines on model.model_path.
            logger.warning("%s: not used by this trainer yet (validation reads model.model_path)", ", ".join(ignored))
        self.output_dir = config.output_dir
        self.checkpoint_dir = self.output_dir / "checkpoints"
        self._check_output_dir()
        strategy_cfg = config.training_strategy
        self.video_scale = _video_scale(config.model.model_path)
        ref_scale = ReferenceScale()
        if strategy_cfg.video is not None:
            for c in strategy_cfg.video.conditions:
                if isinstance(c, ReferenceCondition):
                    ref_scale = reference_scale_from_data(config.data.preprocessed_data_root, c.latents_dir)
        self.reference_scale = ref_scale
        sampler = make_sampler(
            config.flow_matching.timestep_sampling_mode, config.flow_matching.timestep_sampling_params
        )
        self.strategy = FlexibleStrategy(strategy_cfg, sampler, self.video_scale, ref_scale)
        self.dataset = PrecomputedTrainingData(config.data.preprocessed_data_root, strategy_cfg.data_sources())
        self.order = BatchOrder(
            len(self.dataset),
            config.optimization.batch_size,
            config.seed,
            self.accelerator.process_index,
            self.accelerator.num_processes,
        )
        check_validation_config(config)
        self.validation = ValidationRunner(config, self.output_dir, self.device)
        # Before any weight is read: stop with the settings that would fit when this run cannot.
        check_run(config, self.device)
        self._build_models()
        self.wandb = WandbLogger(config) if config.wandb.enabled and self.accelerator.is_main_process else None

    # -- set-up ------------------------------------------------------------------------------------
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

    def _build_models(self) -> None:
        cfg = self.config
        lora_mode = cfg.model.training_mode == "lora"
        # LoRA under bf16 autocast keeps the frozen base in bf16 (the released dtype) on every device:
        # autocast runs the base matmuls in bf16 anyway, so float32 storage only adds a cast per call
        # and twice the memory (benchmarks/trainer_bf16_step.py). Full training keeps float32 masters.
        bf16_base = lora_mode and cfg.acceleration.mixed_precision_mode == "bf16"
        base_dtype = torch.bfloat16 if bf16_base else torch.float32
        torch.manual_seed(cfg.seed)
        quantization = cfg.acceleration.quantization
        # A quantized run builds the model in host memory and quantizes it block by block onto the
        # device, so the device never holds the whole full-precision model.
        model: LTXModel = build_model(
            _transformer_spec(cfg), cfg.model.model_path, dtype=base_dtype,
            device=torch.device("cpu") if quantization else self.device,
        )  # fmt: skip
        self.quantized: QuantizedTransformer | None = None
        if quantization is not None:
            self.quantized = quantize_transformer(
                model, quantization, self.device, progress=not self.disable_progress_bars
            )
        with_audio = cfg.training_strategy.audio is not None
        self.connectors: TextConnectors = build_model(
            text_connectors_spec(with_audio), cfg.model.model_path, dtype=torch.float32, device=self.device
        )
        self.text_contexts = CachedTextContexts(self.connectors)
        model.set_gradient_checkpointing(cfg.optimization.enable_gradient_checkpointing)
        self.base_model = model
        if lora_mode:
            lora = cfg.lora
            assert lora is not None
            self.model = add_lora(model, lora.rank, lora.alpha, lora.dropout, lora.target_modules)
            for p in self.model.parameters():
                if p.requires_grad:
                    p.data = p.data.float()
        else:
            model.requires_grad_(True)
            self.model = model
        self.model.train()
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        opt = cfg.optimization
        if opt.optimizer_type == "adamw8bit":
            import bitsandbytes as bnb

            optimizer = bnb.optim.AdamW8bit(self.trainable, lr=opt.learning_rate)
        else:
            optimizer = torch.optim.AdamW(self.trainable, lr=opt.learning_rate)
        # The scheduler is deliberately not passed to accelerate (see lr_schedules).
        self.scheduler = make_lr_scheduler(optimizer, opt.scheduler_type, opt.steps, opt.scheduler_params)
        self.model, self.optimizer = self.accelerator.prepare(self.model, optimizer)

    # -- settings that a resumed run must share ------------------------------------------------------
    def settings_fingerprint(self) -> dict[str, Any]:
        cfg = self.config
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
            "num_processes": self.accelerator.num_processes,
            "seed": cfg.seed,
            "training_strategy": cfg.training_strategy.model_dump(mode="json"),
            "flow_matching": cfg.flow_matching.model_dump(mode="json"),
            "num_samples": len(self.dataset),
            # Only when set, so runs saved before quantization existed keep their fingerprint.
            **({"quantization": cfg.acceleration.quantization} if cfg.acceleration.quantization else {}),
        }

    # -- saving ------------------------------------------------------------------------------------
    def _unwrapped(self):
        return self.accelerator.unwrap_model(self.model)

    def _strategy_metadata(self) -> dict[str, str]:
        meta = {"training_strategy": json.dumps(self.config.training_strategy.model_dump(mode="json"))}
        s = self.reference_scale
        if s.spatial != 1:
            meta["reference_downscale_factor"] = str(s.spatial)
            meta["reference_spatial_scale_factor"] = str(s.spatial)
        if s.temporal != 1:
            meta["reference_temporal_scale_factor"] = str(s.temporal)
        return meta

    def save_checkpoint(self, step: int) -> Path | None:
        cfg = self.config
        self.accelerator.wait_for_everyone()
        if not self.accelerator.is_main_process:
            return None
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        dtype = torch.bfloat16 if cfg.checkpoints.precision == "bfloat16" else torch.float32
        model = self._unwrapped()
        if cfg.model.training_mode == "lora":
            lora = cfg.lora
            assert lora is not None
            path = self.checkpoint_dir / ckpt.weights_name("lora", step)
            save_lora_file(path, model, lora.rank, lora.alpha, dtype, self._strategy_metadata())
        else:
            path = self.checkpoint_dir / ckpt.weights_name("model", step)
            tensors = {f"{TRANSFORMER_PREFIX}{k}": v.detach().to(dtype).cpu().contiguous()
                       for k, v in model.state_dict().items()}  # fmt: skip
            meta = {"config": json.dumps({"transformer": read_checkpoint_config(cfg.model.model_path, "transformer")})}
            with atomic_output(path, overwrite=True) as tmp:
                save_file(tensors, str(tmp), metadata={**meta, **self._strategy_metadata()})
        if cfg.checkpoints.save_training_state != "off":
            state: dict[str, Any] = {
                "global_step": step,
                "config_fingerprint": ckpt.fingerprint(self.settings_fingerprint()),
                "lr_scheduler_state_dict": self.scheduler.state_dict(),
                "rng_states": {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])},
            }
            if cfg.checkpoints.save_training_state == "full":
                state["optimizer_state_dict"] = self.optimizer.state_dict()
                if cfg.model.training_mode == "lora":
                    state["adapter_state"] = {k: v.float().cpu() for k, v in adapter_state(model).items()}
            ckpt.save_state(self.checkpoint_dir / ckpt.state_name(step), state)
        ckpt.prune(self.checkpoint_dir, cfg.checkpoints.keep_last_n)
        logger.info("saved %s", path)
        return path

    # -- validation --------------------------------------------------------------------------------
    def _validation_due(self, done: int, first: bool) -> bool:
        v = self.config.validation
        if v.interval is None or not v.samples:
            return False
        if first:
            return not v.skip_initial_validation
        return done % v.interval == 0

    def validate(self, step: int) -> list[Path]:
        """Generate the validation samples with the current adapters (main process; others wait)."""
        written: list[Path] = []
        if self.accelerator.is_main_process:
            lora = self.config.lora
            assert lora is not None
            model = self._unwrapped()
            offload = self.config.acceleration.offload_optimizer_during_validation and self.device.type == "cuda"
            if offload:
                _move_optimizer_state(self.optimizer, torch.device("cpu"))
            was_training = model.training
            model.eval()
            try:
                written = self.validation.run(
                    step,
                    lambda path: save_lora_file(
                        path, model, lora.rank, lora.alpha, torch.float32, self._strategy_metadata()
                    ),
                )
            finally:
                model.train(was_training)
                if offload:
                    _move_optimizer_state(self.optimizer, self.device)
        self.accelerator.wait_for_everyone()
        return written

    # -- resuming ----------------------------------------------------------------------------------
    def _load_start(self) -> int:
        cfg = self.config
        if cfg.model.load_checkpoint is None:
            return 0
        weights = ckpt.resolve_load_checkpoint(cfg.model.load_checkpoint)
        model = self._unwrapped()
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
        want = ckpt.fingerprint(self.settings_fingerprint())
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
        self.scheduler.load_state_dict(state["lr_scheduler_state_dict"])
        if "optimizer_state_dict" in state:
            self.optimizer.load_state_dict(state["optimizer_state_dict"])
        if "adapter_state" in state:
            load_adapter_state(model, state["adapter_state"])
        rng = state.get("rng_states", {})
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        logger.info("resuming at step %d from %s", start, state_path)
        return start

    # -- the loop ----------------------------------------------------------------------------------
    def _contexts(self, batch, sample_ids):
        text = batch["conditions"]
        return self.text_contexts(
            text["video_prompt_embeds"].to(self.device, torch.float32),
            text["audio_prompt_embeds"].to(self.device, torch.float32) if "audio_prompt_embeds" in text else None,
            text["prompt_attention_mask"].to(self.device),
            sample_ids,
        )

    def _to_device(self, batch):
        return {s: {k: v.to(self.device) for k, v in t.items()} for s, t in batch.items()}

    def train(self, stop_at: int | None = None, on_step: Callable[[StepRecord], None] | None = None) -> TrainingResult:
        cfg = self.config
        opt = cfg.optimization
        accum = opt.gradient_accumulation_steps
        self.output_dir.mkdir(parents=True, exist_ok=True)
        if self.accelerator.is_main_process:
            with atomic_output(self.output_dir / "training_config.yaml", overwrite=True) as tmp:
                tmp.write_text(dump_config(cfg), encoding="utf-8")
        start = self._load_start()
        end = min(opt.steps, stop_at) if stop_at is not None else opt.steps
        history: list[StepRecord] = []
        data = iter(batch_loader(self.dataset, self.order, start * accum, cfg.data.num_dataloader_workers))
        bar = tqdm(
            total=end,
            initial=start,
            desc="training",
            disable=self.disable_progress_bars or not self.accelerator.is_main_process,
        )
        last_saved: Path | None = None
        if start == 0 and self._validation_due(0, first=True):
            self.validate(0)
        for step in range(start, end):
            began = time.perf_counter()
            losses, sigmas = [], []
            for micro in range(accum):
                micro_step = step * accum + micro
                batch = next(data)
                ids = self.order.indices(micro_step)
                batch = self._to_device(batch)
                draws = PerSampleDraws(cfg.seed, micro_step, ids)
                inputs = self.strategy.prepare(batch, self._contexts(batch, ids), draws)
                with self.accelerator.autocast():
                    video_pred, audio_pred = self.model(
                        inputs.video.modality if inputs.video else None,
                        inputs.audio.modality if inputs.audio else None,
                    )
                per_sample = strategy_loss(inputs, video_pred, audio_pred)
                loss = per_sample.mean()
                if not torch.isfinite(loss):
                    kept = ckpt.latest_weights(self.checkpoint_dir) if self.checkpoint_dir.is_dir() else None
                    raise TrainingDiverged(
                        f"loss is {float(loss.detach())} at step {step + 1}; stopped before the optimizer step. "
                        f"Last good checkpoint: {kept or 'none saved yet'}. Try a lower optimization.learning_rate, "
                        "bf16 instead of fp16, or check the latents (docs/troubleshooting.md)"
                    )
                if micro < accum - 1:
                    with self.accelerator.no_sync(self.model):
                        self.accelerator.backward(loss / accum)
                else:
                    self.accelerator.backward(loss / accum)
                losses.append(per_sample.detach())
                sigmas.append(inputs.sigma.detach())
            if opt.max_grad_norm > 0:
                self.accelerator.clip_grad_norm_(self.trainable, opt.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            lr = self.scheduler.get_last_lr()[0]
            self.scheduler.step()
            per_sample_all = torch.cat(losses)
            step_loss = self.accelerator.reduce(per_sample_all.mean(), reduction="mean")
            record = StepRecord(
                step=step + 1,
                loss=float(step_loss),
                lr=lr,
                step_time=time.perf_counter() - began,
                peak_memory_mb=_peak_memory_mb(self.device),
                sigma_losses=sigma_bucket_losses(torch.cat(sigmas), per_sample_all),
            )
            history.append(record)
            self._report(record, end, bar)
            done = step + 1
            interval = cfg.checkpoints.interval
            if (interval and done % interval == 0) or done == opt.steps:
                last_saved = self.save_checkpoint(done) or last_saved
            if self.wandb is not None:
                self.wandb.log_step(done, {
                    "train/loss": record.loss, "train/learning_rate": record.lr, "train/step_time": record.step_time,
                    "stats/peak_memory_mb": record.peak_memory_mb, **record.sigma_losses,
                })  # fmt: skip
            if self._validation_due(done, first=False):
                written = self.validate(done)
                if self.wandb is not None:
                    self.wandb.log_samples(done, written)
            if on_step is not None:
                on_step(record)
        bar.close()
        if end == opt.steps and self.accelerator.is_main_process:
            if cfg.hub.push_to_hub and last_saved is not None:
                push_to_hub(cfg, last_saved)
            if self.wandb is not None:
                self.wandb.finish()
        return TrainingResult(history=history, final_weights=last_saved, output_dir=self.output_dir)

    def _report(self, record: StepRecord, total: int, bar: tqdm) -> None:
        if not self.accelerator.is_main_process:
            return
        if self.disable_progress_bars:
            if record.step % self.log_every == 0 or record.step == total or record.step == 1:
                logger.info(
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


def _check_bnb() -> None:
    if not torch.cuda.is_available():
        raise ValueError(
            "optimization.optimizer_type 'adamw8bit' needs CUDA (bitsandbytes); use 'adamw' on this machine"
        )
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise ValueError(
            "optimization.optimizer_type 'adamw8bit' needs bitsandbytes: pip install 'ltx-trainer[bnb]'"
        ) from None
