"""split_scenes on a synthetic clip with hard cuts between differently coloured scenes."""

from __future__ import annotations

import pytest
import torch

from ltx_pipelines.io import probe_video, read_audio, read_video
from ltx_trainer.preprocessing.scenes import Scene, parse_length, select_scenes, split_scenes

SCENE_COLOURS = ((200, 40, 40), (230, 230, 230), (40, 60, 200))


def test_finds_the_cuts_frame_accurately_and_keeps_audio(tmp_path, make_clip):
    source = make_clip(tmp_path / "long.mp4", frames=48, height=64, width=64, fps=24, cuts=(16, 32))
    clips = split_scenes(source, tmp_path / "scenes", min_scene_length=4, save_images=2)
    assert [c.name for c in clips] == [f"long-Scene-00{i}.mp4" for i in (1, 2, 3)]
    for clip, colour in zip(clips, SCENE_COLOURS):
        info = probe_video(clip)
        # Frame accuracy: every scene is exactly the 16 frames between the cuts put in the source.
        assert info.frames == 16 and info.has_audio
        frames = read_video(clip).frames.float()
        corner = frames[:, :8, :8].mean(dim=(1, 2))  # the background, away from the moving square
        assert torch.allclose(corner, torch.tensor(colour, dtype=torch.float32).expand(16, 3), atol=12)
        audio = read_audio(clip)
        assert audio.duration == pytest.approx(16 / 24, abs=0.03)
        assert audio.waveform.abs().max() > 0.2  # the tone, not silence
    assert (tmp_path / "scenes" / "scene_report.html").is_file()
    assert len(list((tmp_path / "scenes" / "images").glob("*.jpg"))) == 6


def test_filters_and_limits():
    scenes = [Scene(0, 10), Scene(10, 60), Scene(60, 100)]
    assert select_scenes(scenes, shorter_than=parse_length("1s", 24)) == [Scene(10, 60), Scene(60, 100)]
    assert select_scenes(scenes, skip_start=2, skip_end=3, max_scenes=2) == [Scene(2, 7), Scene(12, 57)]
    assert parse_length("48", 24) == 48 and parse_length("00:00:01.5", 24) == 36
    with pytest.raises(ValueError, match="does not parse"):
        parse_length("two seconds", 24)
