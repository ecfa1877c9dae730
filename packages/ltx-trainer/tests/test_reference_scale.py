"""Downscaled IC-LoRA references: factors come from the data root (not the working directory), scale the
reference tokens' positions, and are written into the LoRA header for the pipelines."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors import safe_open

from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_trainer.config import FlexibleStrategyConfig, parse_config
from ltx_trainer.preprocessing.precomputed import find_samples, load_sample, save_sample
from ltx_trainer.training.draws import PerSampleDraws
from ltx_trainer.training.flexible import FlexibleStrategy, ReferenceScale
from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler
from ltx_trainer.training.trainer import Trainer, reference_scale_from_data

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config, write_dataset


def _v2v_inputs(scale: ReferenceScale):
    config = FlexibleStrategyConfig.model_validate(
        {"video": {"latents_dir": "latents", "conditions": [{"type": "reference", "latents_dir": "ref"}]}}
    )
    strategy = FlexibleStrategy(config, ShiftedLogitNormalSampler(), reference_scale=scale)
    batch = {
        "latents": {"latents": torch.randn(1, 128, 3, 4, 4), "fps": torch.tensor([24.0])},
        "ref": {"latents": torch.randn(1, 128, 2, 2, 2), "fps": torch.tensor([12.0])},
    }
    contexts = TextContexts(video=torch.zeros(1, 128, 32), audio=None, mask=torch.ones(1, 128, dtype=torch.int64))
    return strategy.prepare(batch, contexts, PerSampleDraws(0, 0, [0])).video.modality


def test_scaled_reference_positions():
    plain = _v2v_inputs(ReferenceScale())
    scaled = _v2v_inputs(ReferenceScale(spatial=2, temporal=2))
    k = 2 * 2 * 2  # reference tokens come first
    ref_plain, ref_scaled = plain.positions[:, :, :k], scaled.positions[:, :, :k]
    assert torch.equal(ref_scaled[:, 1:], ref_plain[:, 1:] * 2)  # height and width bounds x s
    first_target_token_end = plain.positions[0, 0, k, 1]  # 1/24 s with the causal first frame
    assert torch.allclose(ref_scaled[:, 0], (ref_plain[:, 0] - first_target_token_end).clamp(min=0))
    assert torch.equal(scaled.positions[:, :, k:], plain.positions[:, :, k:])  # target tokens untouched


def test_factors_from_the_data_root_reach_the_lora_header(tmp_path, monkeypatch):
    from ltx_pipelines.demo import write_demo_checkpoint

    checkpoint = tmp_path / "tiny.safetensors"
    write_demo_checkpoint(checkpoint)
    data = write_dataset(tmp_path / "data", num_samples=2)
    for path in find_samples(data / "reference_latents"):
        sample = load_sample(path)
        meta = {**sample.metadata, "reference_downscale_factor": "2", "reference_temporal_scale_factor": "1"}
        save_sample(path, sample.tensors, meta)
    assert reference_scale_from_data(data, "reference_latents") == ReferenceScale(spatial=2, temporal=1)
    monkeypatch.chdir(tmp_path)  # the reference looked relative to the working directory; we must not
    config = parse_config(training_config(checkpoint, data, tmp_path / "out", "v2v_ic", optimization={"steps": 1}))
    result = Trainer(config).train()
    with safe_open(str(result.final_weights), framework="pt") as f:
        meta = f.metadata()
    assert meta["reference_downscale_factor"] == "2"
    assert "reference_temporal_scale_factor" not in meta  # written only when != 1
