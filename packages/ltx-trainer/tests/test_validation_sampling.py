"""Validation sampling through the ltx_pipelines one-stage pipeline with the run's current LoRA."""

from __future__ import annotations

import sys
from pathlib import Path

import av
import pytest
import torch
from PIL import Image

from ltx_trainer.config import parse_config
from ltx_trainer.training.trainer import Trainer
from ltx_trainer.training.validation import check_validation_config

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
    # The PNG takes only the first decoded chunk: the abandoned decode must not leave autograd off
    # (a later training run in the same process would have no gradients).
    assert torch.is_grad_enabled()


def test_validation_runs_the_trained_transformer_and_writes_nothing_else(tiny_models, tmp_path, monkeypatch):
    """No second transformer is built from the checkpoint and no LoRA file is left in the run folder; the
    samples come from the in-memory model with its adapters (a changed adapter changes the sample)."""
    import ltx_pipelines.engine.prompt_pipeline as prompt_pipeline

    def no_build(*args, **kwargs):
        raise AssertionError("validation built a transformer from the checkpoint")

    monkeypatch.setattr(prompt_pipeline, "loaded", no_build)
    monkeypatch.setattr(prompt_pipeline, "build_transformer", no_build)
    data = write_dataset(tmp_path / "data", num_samples=2)
    validation = {**_validation(), "samples": [{"prompt": "a red ball"}]}
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=validation)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)
    trainer.train()
    hidden = [p.name for p in (tmp_path / "out").rglob(".*")]
    assert hidden == [], hidden
    runner, model = trainer.validation, trainer.parts.unwrapped
    from ltx_pipelines import TI2VidOneStagePipeline

    def latents():
        pipeline = TI2VidOneStagePipeline(
            tiny_models.checkpoint, tiny_models.gemma_root, built_transformer=model.get_base_model(),
            device="cpu", dtype=torch.float32, progress=False,
        )  # fmt: skip
        return runner.generate(pipeline, 0).latents["stage_1.video_latent"]

    model.eval()
    before = latents()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)
    assert not torch.allclose(before, latents())


def test_a_video_only_run_asked_for_audio_samples_with_the_full_transformer(tiny_models, tmp_path):
    """The trained transformer has no audio stream: that validation builds the checkpoint's, with the LoRA
    written to a temporary folder outside the run folder."""
    data = write_dataset(tmp_path / "data", num_samples=2)
    validation = {**_validation(), "samples": [{"prompt": "a red ball"}]}
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", "v2v_ic", validation=validation)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    Trainer(parse_config(raw), disable_progress_bars=True).train()
    with av.open(str(tmp_path / "out" / "samples" / "step_000002_0.mp4")) as container:
        assert container.streams.video and container.streams.audio
    assert [p.name for p in (tmp_path / "out").rglob(".*")] == []


def test_missing_condition_media_is_refused_before_training(tiny_models, tmp_path):
    data = write_dataset(tmp_path / "data", num_samples=2)
    validation = _validation()
    validation["samples"][0]["conditions"] = [{"type": "video_to_audio", "video": str(tmp_path / "clip.mp4")}]
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=validation)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    path = r"validation\.samples\.0\.conditions\.0 \(video_to_audio\)"
    with pytest.raises(ValueError, match=path + r": video file not found"):
        Trainer(parse_config(raw))


@pytest.fixture
def bad_media(tmp_path, make_clip, make_wav):
    short = make_clip(tmp_path / "short.mp4", frames=9)
    long = make_clip(tmp_path / "long.mp4", frames=17)
    mask = make_clip(tmp_path / "mask.mp4", frames=9, audio=False)
    wav = make_wav(tmp_path / "tone.wav", seconds=0.2)
    garbage = tmp_path / "mask.pt"
    garbage.write_text("not a tensor")
    return {"short": str(short), "long": str(long), "mask": str(mask), "wav": str(wav), "garbage": str(garbage)}


BAD_CONDITIONS = {
    "too few frames to crop": (
        {"type": "spatial_crop", "video": "short", "spatial_region": [0, 0, 32, 32]},
        r"has 9 frames, fewer than the sample's 17",
    ),
    "region outside the frame": (
        {"type": "spatial_crop", "video": "long", "spatial_region": [0, 0, 32, 96]},
        r"spatial_region \[0, 0, 32, 96\] reaches outside the 64x64 frame",
    ),
    "region smaller than a cell": (
        {"type": "spatial_crop", "video": "long", "spatial_region": [0, 0, 16, 64]},
        r"covers no whole 32x32-pixel latent cell",
    ),
    "mask video too short": (
        {"type": "mask", "video": "long", "mask": "mask"},
        r"covers 2 latent frames; the sample needs 3",
    ),
    "suffix leaves nothing to generate": (
        {"type": "suffix", "video": "long", "num_frames": 24},
        r"num_frames 24 leaves no frame to generate",
    ),
    "prefix longer than the sample": (
        {"type": "prefix", "video": "long", "num_frames": 25},
        r"num_frames 25 is more than the sample's 17 frames",
    ),
    "audio shorter than the duration": (
        {"type": "prefix", "audio": "wav", "duration": 0.5},
        r"lasts 0\.200 s, less than duration 0\.5 s",
    ),
    "audio mask not a tensor file": (
        {"type": "mask", "audio": "wav", "mask": "garbage"},
        r"is not a tensor file torch\.load reads with weights_only=True",
    ),
    "reference size not a multiple of 32": (
        {"type": "reference", "video": "long", "downscale_factor": 4},
        r"downscale_factor 4: the reference size 64x64 / 4 must be whole multiples of 32x32",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONDITIONS))
def test_bad_condition_media_is_refused_with_its_field_path(tiny_models, tmp_path, bad_media, case):
    condition, message = BAD_CONDITIONS[case]
    condition = {k: bad_media.get(v, v) if k in ("video", "audio", "mask") else v for k, v in condition.items()}
    validation = _validation(video_dims=[64, 64, 17])
    validation["samples"][1]["conditions"] = [{"type": "first_frame", "image_or_video": bad_media["long"]}, condition]
    data = write_dataset(tmp_path / "data", num_samples=1)
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=validation)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    raw["validation"]["samples"][1]["video_dims"] = [64, 64, 17]
    with pytest.raises(ValueError, match=r"validation\.samples\.1\.conditions\.1 \(\w+\): .*" + message):
        check_validation_config(parse_config(raw))


def test_a_condition_on_a_stream_that_is_not_generated_is_refused(tiny_models, tmp_path, bad_media):
    validation = _validation(generate_audio=False)
    validation["samples"][0]["conditions"] = [{"type": "prefix", "audio": bad_media["wav"], "duration": 0.1}]
    data = write_dataset(tmp_path / "data", num_samples=1)
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=validation)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    with pytest.raises(ValueError, match=r"conditions\.0: a 'prefix' condition on the audio needs the audio stream"):
        check_validation_config(parse_config(raw))
