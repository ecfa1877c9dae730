"""`--offload auto` (the default): the memory check picks the transformer's and the text encoder's modes,
logs why, and the run carries the pick (the choice itself is tested in ltx-core's tests/memory)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from ltx_core.runtime import RuntimeOptions
from ltx_pipelines.distilled import COMMAND


@pytest.fixture(autouse=True)
def _demo_cache(monkeypatch, demo_cache_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))


def _argv(out) -> list[str]:
    return ["--demo", "--prompt", "a fox", "--output-path", str(out), "--device", "cpu",
            "--num-frames", "9", "--height", "64", "--width", "64"]  # fmt: skip


def test_auto_is_the_default_and_logs_its_pick_with_the_numbers(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("ltx_core.devices.available_memory", lambda device: 64 * 2**30)
    with caplog.at_level(logging.INFO, logger="ltx_pipelines.cli.command"):
        run = COMMAND.parse(_argv(tmp_path / "x.mp4"))
    lines = [r.getMessage() for r in caplog.records if "--offload auto" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].startswith("--offload auto: transformer: full: needs ") and "57.6 GiB of RAM usable" in lines[0]
    assert lines[1].startswith("--offload auto: text encoder: full: needs ")
    assert run.runtime.options is None  # a plain load
    assert run.parameters["offload_auto"] == "transformer full, text encoder full"


def test_the_pick_reaches_the_runtime_options(tmp_path, monkeypatch):
    """What `choose_offload` picks is what the pipeline is built with (here: streaming from disk)."""
    from ltx_core import offload_auto

    real = offload_auto.choose_offload

    def streaming(*args, **kwargs):
        choice = real(*args, **kwargs)
        pick = offload_auto.ModeChoice("transformer", "stream-disk", "stream-disk: forced by the test")
        return replace(choice, transformer=pick, text_encoder=replace(choice.text_encoder, mode="stream-disk"))

    monkeypatch.setattr("ltx_core.devices.available_memory", lambda device: 64 * 2**30)
    monkeypatch.setattr(offload_auto, "choose_offload", streaming)
    run = COMMAND.parse(_argv(tmp_path / "x.mp4"))
    assert run.runtime.options == RuntimeOptions(offload="disk")
    assert run.runtime.text_encoder_mode == "stream-disk"
    assert run.pipeline_options()["runtime"] == RuntimeOptions(offload="disk")
