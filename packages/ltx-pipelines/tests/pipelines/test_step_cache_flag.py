"""`--step-cache THRESHOLD` on the guided command lines: checked before anything loads, recorded in the sidecar,
and the guided stage's transformer runs through `StepCachedTransformer` (the cache itself is tested in
ltx-core's tests/transformer/test_step_cache.py; calls saved and deviation: benchmarks/step_cache_guided.py)."""

from __future__ import annotations

import json

import pytest

import ltx_core.components.step_cache as step_cache
from ltx_pipelines import ti2vid_one_stage


@pytest.fixture(autouse=True)
def _demo_cache(monkeypatch, demo_cache_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))


def _argv(out, *extra: str) -> list[str]:
    return ["--demo", "--prompt", "a fox", "--output-path", str(out), "--device", "cpu", "--num-frames", "9",
            "--height", "64", "--width", "64", "--num-inference-steps", "2", *extra]  # fmt: skip


@pytest.mark.parametrize("bad", ["0", "-0.1", "nan"])
def test_a_threshold_that_is_not_positive_is_refused_before_loading(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as done:
        ti2vid_one_stage.main(_argv(tmp_path / "x.mp4", "--step-cache", bad))
    assert done.value.code == 2
    assert f"--step-cache {float(bad)} is not accepted" in capsys.readouterr().err


def test_the_guided_stage_runs_through_the_step_cache_and_the_sidecar_records_it(tmp_path, monkeypatch):
    thresholds: list[float] = []

    class Recorded(step_cache.StepCachedTransformer):
        def __init__(self, model, threshold):
            thresholds.append(threshold)
            super().__init__(model, threshold)

    monkeypatch.setattr(step_cache, "StepCachedTransformer", Recorded)
    out = tmp_path / "cached.mp4"
    assert ti2vid_one_stage.main(_argv(out, "--step-cache", "0.3")) == 0
    assert thresholds == [0.3]
    assert json.loads(out.with_suffix(".json").read_text())["parameters"]["step_cache"] == 0.3


def test_without_the_flag_no_cache_is_made(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a step cache was made without --step-cache")

    monkeypatch.setattr(step_cache, "StepCachedTransformer", refuse)
    run = ti2vid_one_stage.COMMAND.parse(_argv(tmp_path / "x.mp4"))
    assert "step_cache" not in run.pipeline_options()
    assert run.parameters["step_cache"] is None


def test_a_step_cache_beside_a_streamed_transformer_is_refused_before_loading(tmp_path, capsys, monkeypatch):
    """The cache skips the deep blocks on a cached step; streaming walks every block in order: one of them."""
    import ltx_core.loader as loader

    def no_load(*args, **kwargs):
        raise AssertionError("a model was built before the refusal")

    monkeypatch.setattr(loader, "build_model", no_load)
    out = tmp_path / "x.mp4"
    with pytest.raises(SystemExit) as done:
        ti2vid_one_stage.main(_argv(out, "--step-cache", "0.3", "--offload", "disk"))
    assert done.value.code == 2
    assert "--step-cache 0.3 skips transformer blocks, which --offload disk streams in order" in capsys.readouterr().err
    assert not out.exists()


def test_the_python_api_refuses_a_step_cache_beside_streaming_when_built(demo_model_files):
    from ltx_core.runtime import RuntimeOptions
    from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline

    with pytest.raises(ValueError, match=r"step_cache skips transformer blocks, which offload 'cpu' streams"):
        TI2VidOneStagePipeline(
            demo_model_files.checkpoint, demo_model_files.gemma_root, step_cache=0.2,
            runtime=RuntimeOptions(offload="cpu"), device="cpu",
        )  # fmt: skip
