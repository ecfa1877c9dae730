"""`python -m ltx_pipelines.dubit` on the CPU: `--demo --demo-family ltx-2.5` dubs a reference clip on the tiny
LTX-2.5 component files with the demo set's Dub-It IC-LoRA (its length snapped to 8k+1, its frame rate, audio
written), and the lip-dub flags are checked before any model is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ltx_pipelines import dubit

pytestmark = pytest.mark.slow

REF_FRAMES, FPS = 12, 25  # 12 frames snap to 9


@pytest.fixture
def demo_home(monkeypatch, ltx25_demo_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    return ltx25_demo_home


@pytest.fixture(scope="module")
def reference(tmp_path_factory, write_clip) -> Path:
    folder = tmp_path_factory.mktemp("dubit")
    return write_clip(folder / "speech.mp4", frames=REF_FRAMES, height=96, width=96, fps=FPS)


def _argv(out: Path, reference: Path, *extra: str) -> list[str]:
    return [
        "--demo", "--demo-family", "ltx-2.5", "--prompt", "she says hello", "--output-path", str(out),
        "--device", "cpu", "--log-level", "WARNING", "--reference-video", str(reference), *extra,
    ]  # fmt: skip


def test_demo_dubs_the_reference_on_ltx25(demo_home, ltx25_demo, reference, read_output, tmp_path, caplog):
    out = tmp_path / "dub.mp4"
    assert dubit.main(_argv(out, reference)) == 0
    # The demo set's Dub-It IC-LoRA is fused: no warning that the reference conditions an untrained model.
    assert "no lip-dub IC-LoRA" not in caplog.text
    written = read_output(out)
    assert written.frames.shape[0] == 9 and written.fps == FPS
    assert written.audio_channels == 2 and written.audio_samples > 0
    parameters = written.sidecar["parameters"]
    assert parameters["demo_family"] == "ltx-2.5" and parameters["model_version"] == "2.5.1"
    assert parameters["reference_video"] == str(reference) and parameters["reference_strength"] == 1.0
    assert parameters["lora"] == [{"path": str(ltx25_demo.dubit_ic_lora), "strength": 1.0}]


class ModelBuilt(AssertionError):
    pass


def test_two_loras_are_refused_before_building(demo_home, reference, tmp_path, monkeypatch, capsys):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ModelBuilt("a model was built before the input was validated")

    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", refuse)
    lora = tmp_path / "dub.safetensors"
    lora.write_bytes(b"")
    out = tmp_path / "out" / "dub.mp4"
    with pytest.raises(SystemExit) as exit_info:
        dubit.main(_argv(out, reference, "--lora", str(lora), "--lora", str(lora)))
    assert exit_info.value.code == 2
    assert "--lora was given 2 times" in capsys.readouterr().err
    assert not out.parent.exists()
