"""Validation sampling through the ltx_pipelines one-stage pipeline with the run's current LoRA."""

from __future__ import annotations

import sys
from pathlib import Path

import av
import pytest
from PIL import Image

from ltx_trainer.config import parse_config
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config, write_dataset


def _validation(**extra):
    return {
        "interval": 2, "skip_initial_validation": True, "inference_steps": 2, "video_dims": [64, 64, 9],
        "samples": [{"prompt": "a red ball"}, {"prompt": "a still image", "video_dims": [64, 32, 1], "seed": 5}],
        **extra,
    }  # fmt: skip


def test_validation_writes_samples_at_the_interval(tiny_models, tmp_path):
    data = write_dataset(tmp_path / "data", num_samples=2)
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=_validation())
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    Trainer(parse_config(raw), disable_progress_bars=True).train()
    samples = sorted(p.name for p in (tmp_path / "out" / "samples").iterdir())
    assert samples == ["step_000002_0.mp4", "step_000002_1.png"]
    with av.open(str(tmp_path / "out" / "samples" / "step_000002_0.mp4")) as container:
        assert container.streams.video[0].height == 64 and container.streams.audio, "video with muxed audio"
    assert Image.open(tmp_path / "out" / "samples" / "step_000002_1.png").size == (64, 32)


def test_unsupported_validation_condition_is_refused_before_training(tiny_models, tmp_path):
    data = write_dataset(tmp_path / "data", num_samples=2)
    validation = _validation()
    validation["samples"][0]["conditions"] = [{"type": "video_to_audio", "video": "clip.mp4"}]
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=validation)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    with pytest.raises(ValueError, match=r"validation\.samples\.0\.conditions\.0: 'video_to_audio' is not supported"):
        Trainer(parse_config(raw))
