"""The trainer on the LTX-2.5 split files (the demo set, made in-process): preprocessing through the packed
Gemma 4 and the split VAE files, a 2-step LoRA on the transformer file, compression factors read from the
VAE file's metadata, and validation renders through the pipelines on the split files."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ltx_core.loader import CheckpointError
from ltx_pipelines.demo import ensure_demo_assets
from ltx_pipelines.demo.ltx25 import Ltx25DemoAssets
from ltx_trainer.config import ConfigError, parse_config
from ltx_trainer.model_files import is_split_set, training_model_files, video_compression
from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.buckets import parse_buckets
from ltx_trainer.preprocessing.plan import PreprocessSettings
from ltx_trainer.preprocessing.run import preprocess_dataset
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config, write_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo25(tmp_path_factory) -> Ltx25DemoAssets:
    return ensure_demo_assets(tmp_path_factory.mktemp("demo25"), family="ltx-2.5")


def _settings(demo: Ltx25DemoAssets, **overrides) -> PreprocessSettings:
    values = {
        "model_path": demo.transformer,
        "text_encoder_path": demo.text_encoder,
        "video_vae_path": demo.video_vae,
        "audio_vae_path": demo.audio_vae,
        "resolution_buckets": tuple(parse_buckets("64x64x9")),
        "device": "cpu",
    }
    values.update(overrides)
    return PreprocessSettings(**values)


def test_preprocess_two_clips_then_train_a_lora_for_two_steps(demo25, tmp_path, make_clip):
    root = tmp_path / "data"
    make_clip(root / "a.mp4", frames=9, height=64, width=64)
    make_clip(root / "b.mp4", frames=9, height=64, width=64, hz=550)
    rows = [{"video": "a.mp4", "caption": "A square slides right."}, {"video": "b.mp4", "caption": "A square on red."}]
    (root / "dataset.json").write_text(json.dumps(rows))

    report = preprocess_dataset(root / "dataset.json", _settings(demo25, decode=True))
    pre = root / ".precomputed"
    latents = [pc.load_sample(p).tensors["latents"] for p in pc.find_samples(pre / pc.LATENTS)]
    assert [tuple(t.shape) for t in latents] == [(128, 2, 2, 2)] * 2
    conditions = [pc.load_sample(p).tensors for p in pc.find_samples(pre / pc.CONDITIONS)]
    # Features through the packed file's text projection: the connector widths of the transformer.
    assert len(conditions) == 2 and {c["video_prompt_embeds"].shape[-1] for c in conditions} == {32}
    assert {c["audio_prompt_embeds"].shape[-1] for c in conditions} == {16}
    assert len(pc.find_samples(pre / pc.AUDIO_LATENTS)) == 2
    # --decode went through the diffusion decoder the VAE file calls for.
    assert len(list((pre / pc.DECODED_VIDEOS).rglob("*.mp4"))) == 2 and report.total_written > 0

    raw = training_config(demo25.transformer, pre, tmp_path / "out", "t2v")
    raw["model"].update(text_encoder_path=str(demo25.text_encoder), video_vae_path=str(demo25.video_vae))
    result = Trainer(parse_config(raw), disable_progress_bars=True).train()
    assert [r.step for r in result.history] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r.loss)) for r in result.history)
    with safe_open(str(result.final_weights), framework="pt") as f:
        keys = list(f.keys())
    assert keys and all(k.startswith("diffusion_model.transformer_blocks.") for k in keys)


def test_full_training_checkpoint_keeps_the_version_metadata(demo25, tmp_path):
    data = write_dataset(tmp_path / "data", num_samples=2)
    raw = training_config(demo25.transformer, data, tmp_path / "out", "t2v", optimization={"steps": 1})
    raw["model"]["training_mode"] = "full"
    raw.pop("lora")
    result = Trainer(parse_config(raw), disable_progress_bars=True).train()
    with safe_open(str(result.final_weights), framework="pt") as f:
        meta = f.metadata()
    assert meta["model_version"] == "2.5.1"
    assert json.loads(meta["gemma_source_checkpoint"])["gemma_version"] == "gemma4-demo-ltx-v1"
    assert json.loads(meta["config"])["transformer"]["use_keyframes_abs_pos_embedding"] is True


def test_compression_comes_from_the_video_vae_metadata(demo25, caplog):
    factors, source = video_compression(demo25.transformer, demo25.video_vae)
    assert (factors.time, factors.height, factors.width) == (8, 32, 32) and source == demo25.video_vae
    with caplog.at_level(logging.WARNING):
        _, source = video_compression(demo25.transformer)
    assert source is None and "model.video_vae_path" in caplog.text
    with pytest.raises(CheckpointError, match="vae"):
        video_compression(demo25.transformer, demo25.duration_head)  # not a VAE file


def test_split_set_is_recognised_and_the_encoder_checked(demo25, tmp_path):
    assert is_split_set(demo25.transformer) and is_split_set(demo25.transformer, demo25.text_encoder)
    files = training_model_files(demo25.transformer, demo25.text_encoder, demo25.video_vae)
    assert files.layout.value == "split" and files.model_version() == (2, 5, 1)
    from ltx_core.text_encoders.gemma.tiny_packed import build_tiny_packed_gemma4

    other = build_tiny_packed_gemma4(tmp_path / "other-gemma4.safetensors", projection_widths=(32, 16))
    with pytest.raises(CheckpointError, match="gemma4-demo-ltx-v1"):
        training_model_files(demo25.transformer, other)
    # The trainer refuses it too, before building anything.
    raw = training_config(demo25.transformer, write_dataset(tmp_path / "data", num_samples=2), tmp_path / "out")
    raw["model"]["text_encoder_path"] = str(other)
    with pytest.raises(CheckpointError, match="gemma_source_checkpoint"):
        Trainer(parse_config(raw), disable_progress_bars=True)


def test_validation_renders_through_the_pipelines_on_split_files(demo25, tmp_path):
    data = write_dataset(tmp_path / "data", num_samples=2)
    validation = {"interval": 1, "skip_initial_validation": True, "inference_steps": 1, "video_dims": [64, 64, 9],
                  "samples": [{"prompt": "a fox"}]}  # fmt: skip
    raw = training_config(demo25.transformer, data, tmp_path / "out", "t2v", validation=validation)
    raw["optimization"]["steps"] = 1
    raw["model"].update(text_encoder_path=str(demo25.text_encoder), video_vae_path=str(demo25.video_vae))
    # The render decodes audio too: without the audio VAE file the run is refused before training.
    with pytest.raises(ValueError, match=r"needs model\.audio_vae_path"):
        Trainer(parse_config(raw), disable_progress_bars=True)
    assert not (tmp_path / "out" / "checkpoints").exists()
    raw["model"]["audio_vae_path"] = str(demo25.audio_vae)
    Trainer(parse_config(raw), disable_progress_bars=True).train()
    assert sorted(p.name for p in (tmp_path / "out" / "samples").iterdir()) == ["step_000001_0.mp4"]


def test_audio_vae_path_is_checked_on_split_files(demo25, tmp_path):
    raw = training_config(demo25.transformer, write_dataset(tmp_path / "data", num_samples=2), tmp_path / "out")
    raw["model"]["audio_vae_path"] = str(demo25.audio_vae)
    assert parse_config(raw).model.audio_vae_path == demo25.audio_vae
    raw["model"]["audio_vae_path"] = str(demo25.video_vae)
    with pytest.raises(ConfigError, match=r"model\.audio_vae_path: .*audio_vae"):
        parse_config(raw)


def test_validation_with_another_video_vae_is_refused(demo25, tmp_path):
    from ltx_pipelines.demo import ensure_demo_assets as ensure

    single = ensure(tmp_path / "demo23")
    raw = training_config(single.checkpoint, write_dataset(tmp_path / "data", num_samples=2), tmp_path / "out")
    raw["model"].update(text_encoder_path=str(single.gemma_root), video_vae_path=str(demo25.video_vae_conv))
    raw["validation"] = {"interval": 1, "samples": [{"prompt": "a fox"}]}
    with pytest.raises(ValueError, match="decode with the VAE of model.model_path"):
        Trainer(parse_config(raw), disable_progress_bars=True)


@pytest.mark.parametrize(
    ("missing", "message"),
    [("video_vae_path", "--video-vae-path"), ("audio_vae_path", "--audio-vae-path")],
)
def test_split_set_without_a_vae_file_is_refused_before_encoding(demo25, tmp_path, make_clip, missing, message):
    root = tmp_path / "data"
    make_clip(root / "a.mp4", frames=9, height=64, width=64)
    (root / "dataset.json").write_text(json.dumps([{"video": "a.mp4", "caption": "A square."}]))
    with pytest.raises(CheckpointError, match=message):
        preprocess_dataset(root / "dataset.json", _settings(demo25, **{missing: None}))
    assert not (root / ".precomputed").exists()


def test_video_vae_of_another_grid_is_refused(demo25, tmp_path):
    from ltx_core.types import SpatioTemporalScaleFactors
    from ltx_trainer.model_files import check_vae_files

    with pytest.raises(CheckpointError, match="compresses 8 x 32 x 32 .* buckets are for 4 x 32 x 32"):
        check_vae_files(demo25.video_vae, None, grid=SpatioTemporalScaleFactors(4, 32, 32))
