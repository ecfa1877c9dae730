"""One optimizer step: `gradient_accumulation_steps` micro-batches forward and backward, clipping, the
optimizer step and one LR-schedule step. A non-finite loss stops before the optimizer step, so the
weights and the checkpoints on disk stay good."""

from __future__ import annotations

import itertools
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from ltx_trainer.training import checkpoints as ckpt
from ltx_trainer.training.build import TrainingParts, text_features_on
from ltx_trainer.training.draws import PerSampleDraws, keyed_global_rng
from ltx_trainer.training.flexible import strategy_loss

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


def peak_memory_mb(device: torch.device) -> float:
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


def text_contexts(parts: TrainingParts, batch, sample_ids):
    """The text contexts of a batch, through the frozen connectors (computed once per sample, then kept)."""
    # In the connectors' dtype (build.py); kept rows come back as computed.
    features = text_features_on(batch["conditions"], parts.device, parts.base_dtype)
    return parts.context_cache(*features, sample_ids)


def diverged_samples(parts: TrainingParts, ids: list[int], per_sample: torch.Tensor) -> str:
    """Which samples of the micro-batch gave a non-finite loss, by name, and which of their files hold NaN or
    infinite values (the data, not the training, is then what went wrong)."""
    losses = per_sample.detach().float().cpu().reshape(-1)
    bad = [i for i, value in zip(ids, losses.tolist(), strict=False) if not torch.isfinite(torch.tensor(value))]
    parts_of_line = []
    for index in bad or ids:
        name = str(parts.dataset.keys[index])
        broken = parts.dataset.non_finite_tensors(index)
        if broken:
            where = "; ".join(f"{str(path)!r} holds NaN/inf in {', '.join(names)}" for path, names in broken.items())
            parts_of_line.append(f"sample {name!r} ({where})")
        else:
            parts_of_line.append(f"sample {name!r}")
    if not any("NaN/inf" in part for part in parts_of_line):
        parts_of_line.append("whose data files hold only finite values")
    return ", ".join(parts_of_line)


def to_device(parts: TrainingParts, batch):
    return {s: {k: v.to(parts.device) for k, v in t.items()} for s, t in batch.items()}


def train_step(parts: TrainingParts, step: int, data: Iterator) -> StepRecord:
    """Optimizer step `step + 1` over the next micro-batches of `data`."""
    cfg, acc = parts.config, parts.accelerator
    accum = cfg.optimization.gradient_accumulation_steps
    began = time.perf_counter()
    losses, sigmas = [], []
    for micro in range(accum):
        micro_step = step * accum + micro
        batch = to_device(parts, next(data))
        ids = parts.order.indices(micro_step)
        draws = PerSampleDraws(cfg.seed, micro_step, ids)
        # LoRA dropout draws from the global generator: keyed by the micro-step, so resume replays it.
        with keyed_global_rng(cfg.seed, micro_step, acc.process_index, parts.device):
            inputs = parts.strategy.prepare(batch, text_contexts(parts, batch, ids), draws)
            with acc.autocast():
                video_pred, audio_pred = parts.model(
                    inputs.video.modality if inputs.video else None,
                    inputs.audio.modality if inputs.audio else None,
                )
            per_sample = strategy_loss(inputs, video_pred, audio_pred)
            loss = per_sample.mean()
            if not torch.isfinite(loss):
                last_good = ckpt.latest_complete(parts.checkpoint_dir)
                raise TrainingDiverged(
                    f"loss is {float(loss.detach())} at step {step + 1} on {diverged_samples(parts, ids, per_sample)}; "
                    f"stopped before the optimizer step. Last good checkpoint: {last_good or 'none saved yet'}. "
                    "Try a lower optimization.learning_rate, bf16 instead of fp16, or check the latents "
                    "(docs/troubleshooting.md)"
                )
            if micro < accum - 1:
                with acc.no_sync(parts.model):
                    acc.backward(loss / accum)
            else:
                acc.backward(loss / accum)
        losses.append(per_sample.detach())
        sigmas.append(inputs.sigma.detach())
    if cfg.optimization.max_grad_norm > 0:
        acc.clip_grad_norm_(parts.trainable, cfg.optimization.max_grad_norm)
    parts.optimizer.step()
    parts.optimizer.zero_grad(set_to_none=True)
    lr = parts.scheduler.get_last_lr()[0]
    parts.scheduler.step()
    per_sample_all = torch.cat(losses)
    step_loss = acc.reduce(per_sample_all.mean(), reduction="mean")
    return StepRecord(
        step=step + 1,
        loss=float(step_loss),
        lr=lr,
        step_time=time.perf_counter() - began,
        peak_memory_mb=peak_memory_mb(parts.device),
        sigma_losses=sigma_bucket_losses(torch.cat(sigmas), per_sample_all),
    )
