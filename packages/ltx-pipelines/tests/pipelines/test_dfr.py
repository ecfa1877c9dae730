"""DFRPipeline's checks before loading: the keyframe embedding, the temporal rounds and the canvas length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ltx_pipelines.dfr import DFRPipeline, keyframe_embedding_problem, nearest_latent_frames
from ltx_pipelines.engine.requests import VideoRequest


def _transformer_file(path: Path, *, keyframe_embedding: bool | None) -> Path:
    config: dict = {"num_layers": 1}
    if keyframe_embedding is not None:
        config["use_keyframes_abs_pos_embedding"] = keyframe_embedding
    save_file(
        {"model.diffusion_model.proj_out.weight": torch.zeros(2, 2)},
        path,
        metadata={"config": json.dumps({"transformer": config}), "model_version": "2.5.0"},
    )
    return path


@pytest.mark.parametrize("flag", [None, False])
def test_a_transformer_without_the_keyframe_embedding_is_refused_before_loading(tmp_path, flag):
    checkpoint = _transformer_file(tmp_path / "t.safetensors", keyframe_embedding=flag)
    assert "use_keyframes_abs_pos_embedding" in (keyframe_embedding_problem(checkpoint) or "")
    # Nothing is loaded: the upsampler and Gemma named here do not even exist.
    with pytest.raises(ValueError, match=r"DFR cannot run on .*t\.safetensors.*lacks use_keyframes_abs_pos_embedding"):
        DFRPipeline(checkpoint, tmp_path / "missing-upsampler.safetensors", gemma_root=tmp_path / "no-gemma")


def test_rounds_and_lengths_are_checked_before_any_model(tmp_path):
    checkpoint = _transformer_file(tmp_path / "t.safetensors", keyframe_embedding=True)
    assert keyframe_embedding_problem(checkpoint) is None
    unread_gemma = tmp_path / "gemma"  # exists (checked when the pipeline is made), never read
    unread_gemma.mkdir()
    pipeline = DFRPipeline(checkpoint, tmp_path / "up.safetensors", gemma_root=unread_gemma)
    size = dict(height=128, width=128, frame_rate=24.0)
    with pytest.raises(ValueError, match="temporal_upsample_rounds must be 0, 1 or 2, got 3"):
        pipeline.generate("p", seed=1, video=VideoRequest(num_frames=9, **size), temporal_upsample_rounds=3)
    with pytest.raises(ValueError, match=r"needs a temporal upsampler"):
        pipeline.generate("p", seed=1, video=VideoRequest(num_frames=9, **size), temporal_upsample_rounds=1)
    with pytest.raises(ValueError, match=r"num_frames must be 8k\+1.*got 10"):
        pipeline.generate("p", seed=1, video=VideoRequest(num_frames=10, **size))
    with pytest.raises(ValueError, match=r"DFR places its own keyframes: generated_keyframes 2 is not accepted"):
        pipeline.generate("p", seed=1, video=VideoRequest(num_frames=9, generated_keyframes=2, **size))


def test_new_slots_start_from_the_nearest_latent_frame():
    video = torch.arange(7.0).view(1, 1, 7, 1, 1)
    assert nearest_latent_frames(video, (24, 3, 100)).flatten().tolist() == [3.0, 0.0, 6.0]
