"""Load and durability together (issue 37): 8 concurrent clients submit 40 jobs to a demo server with 2 CPU
workers; the server is killed with SIGKILL while jobs run and started again on the same data folder. Every
accepted job then ends completed (or failed with a reason), each output plays (PyAV decodes its 9 frames
and finds its audio stream), and no job or output is doubled."""

from __future__ import annotations

import signal
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from serve_testing import playable_streams, start_server, stop_server, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")]

CLIENTS = 8
JOBS = 40
SERVER_FLAGS = ("--workers", "2", "--no-warmup", "--max-queued", str(JOBS))


def submit_all(client: openai.OpenAI) -> list[str]:
    """The ids of JOBS jobs sent by CLIENTS threads at once; the SDK retries, the idempotency key keeps a
    retried submission from becoming a second job."""

    def submit(i: int) -> str:
        video = client.videos.create(
            prompt=f"clip {i}", size="64x64", extra_body={"num_frames": 9, "seed": i},
            extra_headers={"Idempotency-Key": f"load-{i}"},
        )  # fmt: skip
        return video.id

    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(submit, range(JOBS)))


def listed_ids(client: openai.OpenAI) -> list[str]:
    """Every id the paged list shows (the SDK's auto-pagination follows `after`)."""
    return [video.id for video in client.videos.list(limit=7, order="asc")]


def test_40_jobs_from_8_clients_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process, url = start_server(data, *SERVER_FLAGS)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=2)
    ids = submit_all(client)
    assert len(set(ids)) == JOBS

    def running_after_some_done() -> bool:
        videos = [client.videos.retrieve(i) for i in ids]
        statuses = [v.status for v in videos]
        return statuses.count("completed") >= 2 and "in_progress" in statuses

    wait_for(running_after_some_done, timeout=900, every=0.2)
    process.send_signal(signal.SIGKILL)  # its workers die with it (PR_SET_PDEATHSIG)
    process.wait()

    process, url = start_server(data, *SERVER_FLAGS, log_name="server2.log")
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=2)
        assert submit_all(client) == ids  # a client repeating its submissions after the restart gets the same jobs

        def all_ended() -> list | None:
            videos = [client.videos.retrieve(i) for i in ids]
            return videos if all(v.status in ("completed", "failed") for v in videos) else None

        videos = wait_for(all_ended, timeout=1800, every=1)
        listed = listed_ids(client)
    finally:
        stop_server(process)

    assert sorted(listed) == sorted(ids) and len(listed) == JOBS
    with sqlite3.connect(data / "jobs.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM jobs").fetchone() == (JOBS,)
    failed = [v for v in videos if v.status == "failed"]
    assert all(v.error and v.error.message for v in failed), failed
    completed = sorted(v.id for v in videos if v.status == "completed")
    outputs = sorted(p.stem for p in (data / "outputs").glob("*.mp4"))
    assert outputs == completed  # one output per completed job, none doubled, none for a failed one
    for job_id in completed:
        assert playable_streams(data / "outputs" / f"{job_id}.mp4") == (9, 1), job_id
    assert not list((data / "outputs").glob("*.latents.safetensors"))
    assert not list((data / "outputs").glob(".*"))  # no partial file left looking like an output
    assert any(v.model_extra["attempts"] > 1 for v in videos)  # the kill did interrupt running jobs
