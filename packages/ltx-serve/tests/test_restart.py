"""Durability: `kill -9` of the server mid-way, restart on the same data folder; every accepted job ends
completed, each output plays, none is duplicated, and the job killed after denoising resumes from its saved
latents instead of starting again."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from serve_testing import playable_streams, start_server, stop_server, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")]


def test_kill_9_and_restart_loses_no_job(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process, url = start_server(data, "--workers", "1", "--no-warmup")
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)

    def submit(i: int) -> str:
        return client.videos.create(prompt=f"clip {i}", size="64x64", extra_body={"num_frames": 9, "seed": i}).id

    with ThreadPoolExecutor(3) as pool:
        ids = list(pool.map(submit, range(3)))
    # Kill once a job has finished denoising (its latents are saved) and not yet been marked done.
    latents = wait_for(lambda: next((data / "outputs").glob("*.latents.safetensors"), None), timeout=300, every=0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    interrupted = latents.name.split(".")[0]
    assert interrupted in ids

    process, url = start_server(data, "--workers", "1", "--no-warmup", log_name="server2.log")
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)

        def all_completed() -> list | None:
            videos = [client.videos.retrieve(i) for i in ids]
            return videos if all(v.status == "completed" for v in videos) else None

        done = wait_for(all_completed, timeout=400, every=1)
        listed = [v.id for v in client.videos.list(limit=100).data]
    finally:
        stop_server(process)
    assert sorted(v.id for v in done) == sorted(ids)
    assert sorted(listed) == sorted(ids)
    outputs = sorted(p.name for p in (data / "outputs").glob("*.mp4"))
    assert outputs == sorted(f"{i}.mp4" for i in ids), outputs  # one output per job, none doubled
    for i in ids:
        assert playable_streams(data / "outputs" / f"{i}.mp4") == (9, 1)
    assert not list((data / "outputs").glob("*.latents.safetensors"))
    resumed = next(v for v in done if v.id == interrupted)
    assert resumed.model_extra["attempts"] == 2
    assert "decoding the latents an earlier attempt saved" in (tmp_path / "server2.log").read_text()
