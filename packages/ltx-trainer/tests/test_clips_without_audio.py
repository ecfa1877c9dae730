"""Clips without an audio track in audio-video training: preprocessing keeps them (silent audio latents
marked `has_audio` = 0, counted in the report), training masks their audio loss (they train the video),
and a mode that generates only audio leaves them out with a count."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch

from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_trainer.config import FlexibleStrategyConfig
from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.audio_latents import NO_TRACK_STAGE
from ltx_trainer.preprocessing.buckets import parse_buckets
from ltx_trainer.preprocessing.plan import PreprocessSettings
from ltx_trainer.preprocessing.run import preprocess_dataset
from ltx_trainer.training.data import PrecomputedTrainingData, audio_only_source, collate
from ltx_trainer.training.draws import PerSampleDraws
from ltx_trainer.training.flexible import FlexibleStrategy, masked_mse
from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler

sys.path.insert(0, str(Path(__file__).parent))
from training_data import MODES, TEXT_LEN, write_dataset


def test_a_clip_without_audio_is_kept_with_silent_latents_marked_absent(tmp_path, make_clip, tiny_models):
    root = tmp_path / "data"
    make_clip(root / "videos" / "sound.mp4", frames=9, fps=24)
    make_clip(root / "videos" / "mute.mp4", frames=9, fps=24, audio=False)
    rows = [{"video": f"videos/{n}.mp4", "caption": n} for n in ("sound", "mute")]
    (root / "dataset.json").write_text(json.dumps(rows))
    settings = PreprocessSettings(
        model_path=tiny_models.checkpoint, text_encoder_path=tiny_models.gemma_root,
        resolution_buckets=tuple(parse_buckets("64x64x9")), device="cpu",
    )  # fmt: skip
    report = preprocess_dataset(root / "dataset.json", settings)
    assert report.drops == []
    assert report.written[NO_TRACK_STAGE] == 1 and report.written["audio"] == 1
    assert NO_TRACK_STAGE in report.render()
    audio = root / ".precomputed" / pc.AUDIO_LATENTS / "videos"
    mute, sound = pc.load_sample(audio / "mute.safetensors"), pc.load_sample(audio / "sound.safetensors")
    assert not bool(mute.tensors[pc.HAS_AUDIO]) and pc.HAS_AUDIO not in sound.tensors
    assert mute.tensors["latents"].shape == sound.tensors["latents"].shape  # same span, same token count
    assert torch.isfinite(mute.tensors["latents"]).all()


def _mark_silent(data_root: Path, name: str) -> None:
    path = pc.sample_path(data_root, pc.AUDIO_LATENTS, Path(f"videos/{name}.mp4"))
    sample = pc.load_sample(path)
    pc.save_sample(path, {**sample.tensors, pc.HAS_AUDIO: torch.tensor(False)})


def test_the_audio_loss_of_a_silent_sample_is_masked_and_its_video_still_trains(tmp_path):
    data_root = write_dataset(tmp_path, num_samples=2)
    _mark_silent(data_root, "clip01")
    config = FlexibleStrategyConfig(**MODES["t2v"])
    data = PrecomputedTrainingData(data_root, config.data_sources(), require_audio_in=audio_only_source(config))
    assert len(data) == 2  # video is generated: the silent sample stays
    batch = collate([data[0], data[1]])  # sample 0's file has no flag: it is filled in as present
    assert batch[pc.AUDIO_LATENTS][pc.HAS_AUDIO].tolist() == [True, False]
    contexts = TextContexts(
        video=torch.zeros(2, TEXT_LEN, 32), audio=torch.zeros(2, TEXT_LEN, 16), mask=torch.ones(2, TEXT_LEN)
    )
    strategy = FlexibleStrategy(config, ShiftedLogitNormalSampler())
    inputs = strategy.prepare(batch, contexts, PerSampleDraws(0, 0, [0, 1]))
    assert inputs.audio.loss_mask[0].all() and not inputs.audio.loss_mask[1].any()
    assert inputs.video.loss_mask.all()
    prediction = torch.zeros_like(inputs.audio.targets)
    audio_loss = masked_mse(prediction, inputs.audio.targets, inputs.audio.loss_mask)
    assert audio_loss[0] > 0 and audio_loss[1] == 0


def test_a_mode_that_trains_only_audio_leaves_silent_samples_out(tmp_path, caplog):
    data_root = write_dataset(tmp_path, num_samples=3)
    _mark_silent(data_root, "clip02")
    for mode, kept in (("t2a", 2), ("v2a", 2), ("a2v", 3), ("t2v", 3)):
        config = FlexibleStrategyConfig(**MODES[mode])
        with caplog.at_level(logging.WARNING):
            caplog.clear()
            data = PrecomputedTrainingData(data_root, config.data_sources(), require_audio_in=audio_only_source(config))
        assert len(data) == kept, mode
        assert ("1 sample(s) come from clips without an audio track" in caplog.text) == (kept == 2), mode


@pytest.mark.parametrize("flags", [[True, True], [False, False]])
def test_collate_keeps_a_flag_every_file_carries(flags):
    items = [{"audio_latents": {"latents": torch.zeros(1), pc.HAS_AUDIO: torch.tensor(f)}} for f in flags]
    assert collate(items)["audio_latents"][pc.HAS_AUDIO].tolist() == flags
