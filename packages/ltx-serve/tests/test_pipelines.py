"""Serving the guided pipelines (`--pipelines`): a request names one of those the workers hold, may carry a
negative prompt, and its job gives the bytes of `python -m ltx_pipelines.<pipeline>` with the same flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ltx_serve.api import ApiConfig, create_app
from ltx_serve.pipelines import command_of, split_model_argv
from ltx_serve.requests import Limits, served_pipelines
from ltx_serve.server import parse_options
from ltx_serve.store import SqliteJobStore
from ltx_serve.worker import Worker, WorkerConfig, output_path

# Two guided steps keep a demo run to seconds; the flag is the server's and reaches every guided pipeline.
GUIDED_ARGV = ("--demo", "--num-inference-steps", "2")


def limits_for(*names: str) -> Limits:
    return Limits(default_size="64x64", default_seconds="0.36", pipelines=served_pipelines(names))


def test_requests_name_a_served_pipeline_and_only_guided_ones_take_a_negative_prompt(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    limits = limits_for("distilled", "ti2vid_one_stage")
    client = TestClient(create_app(ApiConfig(store=store, data_dir=tmp_path, limits=limits)))
    plain = client.post("/v1/videos", json={"prompt": "a"}).json()
    assert plain["pipeline"] == "distilled"  # the first served pipeline is the default
    refused = client.post("/v1/videos", json={"prompt": "a", "negative_prompt": "blur"})
    assert refused.status_code == 400 and "ti2vid_one_stage" in refused.json()["error"]["message"]
    guided = client.post(
        "/v1/videos",
        json={"prompt": "a", "pipeline": "ti2vid_one_stage", "negative_prompt": "blur", "size": "96x64"},
    )
    assert guided.status_code == 200, guided.text
    request = store.get(guided.json()["id"]).request
    assert request["negative_prompt"] == "blur" and (request["width"], request["pipeline"]) == (96, "ti2vid_one_stage")
    # The one-stage pipeline takes multiples of 32; the two-stage ones (distilled) multiples of 64.
    assert client.post("/v1/videos", json={"prompt": "a", "size": "96x64"}).json()["error"]["param"] == "size"
    unserved = client.post("/v1/videos", json={"prompt": "a", "pipeline": "ti2vid_two_stages"})
    assert (
        unserved.json()["error"]["message"]
        == "pipeline 'ti2vid_two_stages': this server runs distilled, ti2vid_one_stage"
    )
    assert store.counts() == {"queued": 2}


def test_each_pipeline_gets_the_flags_its_command_takes() -> None:
    argv = ["--distilled-checkpoint-path", "d.safetensors", "--checkpoint-path", "f.safetensors", "--gemma-root",
            "g", "--negative-prompt", "blur"]  # fmt: skip
    split = split_model_argv(["distilled", "ti2vid_one_stage"], argv)
    assert split == {
        "distilled": ("--distilled-checkpoint-path", "d.safetensors", "--gemma-root", "g"),
        "ti2vid_one_stage": ("--checkpoint-path", "f.safetensors", "--gemma-root", "g", "--negative-prompt", "blur"),
    }
    with pytest.raises(ValueError, match="--num-inference-steps: not a flag of the served pipelines"):
        split_model_argv(["distilled"], ["--demo", "--num-inference-steps", "2"])


def test_server_refuses_an_unknown_pipeline_or_flag_at_start(capsys) -> None:
    for argv, message in (
        (["--demo", "--pipelines", "distilled,sora"], "'sora' is not served"),
        (["--demo", "--num-inference-steps", "2"], "--num-inference-steps: not a flag of the served pipelines"),
    ):
        with pytest.raises(SystemExit) as stop:
            parse_options(argv)
        assert stop.value.code == 2 and message in capsys.readouterr().err
    options = parse_options(["--demo", "--pipelines", "ti2vid_two_stages_hq,distilled", *GUIDED_ARGV[1:]])
    assert list(options.limits.pipelines) == ["ti2vid_two_stages_hq", "distilled"]
    assert options.model_argv == {"ti2vid_two_stages_hq": GUIDED_ARGV, "distilled": ("--demo",)}


def count_weight_reads(worker: Worker, monkeypatch: pytest.MonkeyPatch) -> list:
    """The files the worker's weight cache reads from now on (a hit reads none)."""
    cache = worker.models.cache
    reads: list = []
    get_or_load = cache.get_or_load

    def counting(paths, ops, dtype, load):
        return get_or_load(paths, ops, dtype, lambda: reads.append(paths) or load())

    monkeypatch.setattr(cache, "get_or_load", counting)
    return reads


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["ti2vid_one_stage", "ti2vid_two_stages", "ti2vid_two_stages_hq"])
def test_warm_guided_job_with_negative_prompt_gives_the_cli_bytes(pipeline: str, tmp_path: Path, monkeypatch) -> None:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    limits = limits_for(pipeline)
    client = TestClient(create_app(ApiConfig(store=store, data_dir=tmp_path, limits=limits)))
    body = {"prompt": "a red fox", "pipeline": pipeline, "negative_prompt": "blurry, static", "seed": 4,
            "size": "64x64", "num_frames": 9, "frame_rate": 25}  # fmt: skip
    video = client.post("/v1/videos", json=body).json()
    worker = Worker(WorkerConfig(worker_id="w", model_argv={pipeline: GUIDED_ARGV}, data_dir=tmp_path), store)
    weights_read = count_weight_reads(worker, monkeypatch)
    worker.warm_up()
    assert weights_read and worker.text_encoders.loads == 1
    weights_read.clear()
    assert worker.serve_one()
    job = store.get(video["id"])
    assert job.status == "completed", job.error
    # Warm: the job read no weight file and loaded no text encoder; its steps were known from the warm-up.
    assert weights_read == [] and worker.text_encoders.loads == 1
    assert job.steps == job.step == worker.steps[pipeline] > 0
    served = output_path(tmp_path, job.id)
    sidecar = json.loads(served.with_suffix(".json").read_text())
    assert sidecar["parameters"]["negative_prompt"] == "blurry, static"

    cli = tmp_path / "cli" / "cli.mp4"
    argv = [*GUIDED_ARGV, "--prompt", "a red fox", "--negative-prompt", "blurry, static", "--seed", "4",
            "--height", "64", "--width", "64", "--num-frames", "9", "--frame-rate", "25",
            "--output-path", str(cli)]  # fmt: skip
    assert command_of(pipeline).main(argv) == 0
    assert served.read_bytes() == cli.read_bytes()
