"""What a run reports: the progress bar or log lines (`report`), and the optional outputs: Weights & Biases
metrics and the Hugging Face Hub upload.

Both are set up before training starts, so a missing package or a missing repo id fails at once, not
after hours of training.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ltx_trainer.config import LtxTrainerConfig

if TYPE_CHECKING:
    from ltx_trainer.training.build import TrainingParts
    from ltx_trainer.training.step import StepRecord

logger = logging.getLogger(__name__)
# The progress lines keep the loop's logger name: log filters (and the tests) select them by it.
progress_logger = logging.getLogger("ltx_trainer.training.trainer")


class WandbLogger:
    """Logs `train/loss`, `train/learning_rate`, `train/step_time`, `stats/peak_memory_mb` and the sigma
    buckets; run name = the output folder's name."""

    def __init__(self, config: LtxTrainerConfig) -> None:
        try:
            import wandb
        except ImportError:
            raise ValueError(
                "wandb.enabled is true but wandb is not installed: pip install 'ltx-trainer[wandb]'"
            ) from None
        w = config.wandb
        self._wandb = wandb
        self.run = wandb.init(
            project=w.project, entity=w.entity, tags=w.tags, name=config.output_dir.name,
            config=config.model_dump(mode="json"), dir=str(config.output_dir),
        )  # fmt: skip
        self.log_videos = w.log_validation_videos

    def log_step(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def log_record(self, record) -> None:
        """A step's `StepRecord`: loss, learning rate, step time, peak memory and the per-sigma losses."""
        self.log_step(record.step, {
            "train/loss": record.loss, "train/learning_rate": record.lr, "train/step_time": record.step_time,
            "stats/peak_memory_mb": record.peak_memory_mb, **record.sigma_losses,
        })  # fmt: skip

    def log_samples(self, step: int, paths: list[Path]) -> None:
        if not self.log_videos:
            return
        media = {}
        for i, path in enumerate(paths):
            if path.suffix == ".mp4":
                media[f"validation/sample_{i}"] = self._wandb.Video(str(path))
            elif path.suffix == ".png":
                media[f"validation/sample_{i}"] = self._wandb.Image(str(path))
            elif path.suffix == ".wav":
                media[f"validation/sample_{i}"] = self._wandb.Audio(str(path))
        if media:
            self.run.log(media, step=step)

    def finish(self) -> None:
        self.run.finish()


def push_to_hub(config: LtxTrainerConfig, weights: Path, api: Any = None) -> str:
    """Create (or reuse) the model repo and upload the final weights, the config and a short model card."""
    from huggingface_hub import HfApi

    repo_id = config.hub.hub_model_id
    assert repo_id is not None  # the config requires it when pushing
    api = api or HfApi()
    api.create_repo(repo_id, repo_type="model", exist_ok=True)
    card = (
        f"# {repo_id}\n\nLTX-2 LoRA trained with ltx-trainer ({config.model.training_mode}, "
        f"{config.optimization.steps} steps).\n\nPrompts used for validation:\n\n"
        + "".join(f"- {s.prompt}\n" for s in config.validation.samples)
    )
    api.upload_file(path_or_fileobj=str(weights), path_in_repo=weights.name, repo_id=repo_id)
    api.upload_file(path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id=repo_id)
    config_file = config.output_dir / "training_config.yaml"
    if config_file.is_file():
        api.upload_file(path_or_fileobj=str(config_file), path_in_repo=config_file.name, repo_id=repo_id)
    logger.info("pushed %s to https://huggingface.co/%s", weights.name, repo_id)
    return repo_id


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
