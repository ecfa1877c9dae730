"""Two servers on one PostgreSQL queue (started by `pgserver`) and one shared data folder: both take jobs,
each job runs once, every job completes whichever server it was submitted to."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from serve_testing import playable_streams, postgres_server, start_server, stop_server, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")]


def test_two_servers_share_one_postgres_queue(tmp_path: Path) -> None:

    with postgres_server() as url:
        check_two_servers(url, tmp_path)


def check_two_servers(url: str, tmp_path: Path) -> None:
    from ltx_serve.postgres_store import PostgresJobStore

    data = tmp_path / "shared"
    servers = []
    try:
        for name in ("a", "b"):
            servers.append(start_server(data, "--queue", url, "--workers", "1", "--no-warmup", log_name=f"{name}.log"))
        clients = [openai.OpenAI(base_url=f"{u}/v1", api_key="unused", max_retries=0) for _, u in servers]
        ids = [
            clients[i % 2].videos.create(prompt=f"clip {i}", size="64x64", extra_body={"num_frames": 9, "seed": i}).id
            for i in range(4)
        ]

        def all_completed() -> list | None:
            videos = [clients[0].videos.retrieve(i) for i in ids]
            return videos if all(v.status == "completed" for v in videos) else None

        done = wait_for(all_completed, timeout=500, every=1)
        assert sorted(v.id for v in clients[1].videos.list(limit=10).data) == sorted(ids)
    finally:
        for process, _ in servers:
            stop_server(process)
    store = PostgresJobStore(url)
    jobs = [store.get(i) for i in ids]
    store.close()
    assert all(j.attempts == 1 for j in jobs)
    servers_that_worked = {j.claimed_by.rsplit("-w", 1)[0] for j in jobs}
    assert len(servers_that_worked) == 2, servers_that_worked
    for video in done:
        assert playable_streams(data / "outputs" / f"{video.id}.mp4") == (9, 1)
