"""`--no-audio-output`: the written video has no audio stream (the sidecar says so), and an audio-only
output refuses the flag before anything loads."""

from __future__ import annotations

import json

import av
import pytest

from ltx_pipelines import distilled, t2a_one_stage


def test_the_video_is_written_without_its_audio_stream(tmp_path, monkeypatch, demo_cache_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    out = tmp_path / "silent.mp4"
    argv = ["--demo", "--prompt", "a fox", "--output-path", str(out), "--height", "64", "--width", "64",
            "--num-frames", "9", "--log-level", "WARNING", "--no-audio-output"]  # fmt: skip
    assert distilled.main(argv) == 0
    with av.open(str(out)) as container:
        assert not container.streams.audio
        assert sum(1 for _ in container.decode(video=0)) == 9
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["audio"] is None and sidecar["parameters"]["no_audio_output"] is True


def test_an_audio_only_output_refuses_the_flag(tmp_path, capsys):
    out = tmp_path / "a.wav"
    with pytest.raises(SystemExit) as info:
        t2a_one_stage.main(["--demo", "--prompt", "rain", "--output-path", str(out), "--no-audio-output"])
    assert info.value.code == 2
    assert "--no-audio-output" in capsys.readouterr().err
    assert not out.exists()
