"""The supervisor restarts a worker that died, but not one that cannot build its pipelines: after
`WARM_UP_ATTEMPTS` warm-up failures in a row it stays down, and a server left without workers stops itself
(before, a bad model file made the supervisor respawn its worker forever)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ltx_serve import server
from ltx_serve.requests import Limits
from ltx_serve.store import open_store
from ltx_serve.worker import EXIT_WARM_UP_FAILED


class _Exited:
    """A worker process that has exited with `exitcode`."""

    def __init__(self, exitcode: int) -> None:
        self.exitcode = exitcode

    def is_alive(self) -> bool:
        return False


def _supervisor(tmp_path: Path, workers: int) -> server.Supervisor:
    options = server.ServeOptions(
        host="127.0.0.1", port=0, data_dir=tmp_path, queue=None, devices=[None] * workers, api_key=None,
        limits=Limits(), model_argv={"distilled": ()}, max_queued=10, max_attempts=3, warm_up=False,
        stale_after_s=60.0,
    )  # fmt: skip
    return server.Supervisor(options, open_store(None, tmp_path))


def test_a_worker_that_cannot_build_its_pipelines_stays_down_and_the_last_one_stops_the_server(tmp_path, monkeypatch):
    supervisor = _supervisor(tmp_path, workers=2)
    spawned: list[str] = []
    monkeypatch.setattr(supervisor, "spawn", lambda worker_id: spawned.append(worker_id))
    signals: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: signals.append((pid, sig)))
    first, second = sorted(supervisor.configs)

    # A crash is restarted as before, however often; a warm-up failure up to WARM_UP_ATTEMPTS times.
    supervisor.processes = {first: _Exited(-9), second: _Exited(EXIT_WARM_UP_FAILED)}
    for _ in range(server.WARM_UP_ATTEMPTS - 1):
        supervisor.check()
    assert spawned.count(first) == spawned.count(second) == server.WARM_UP_ATTEMPTS - 1
    supervisor.check()
    assert second not in supervisor.processes and first in supervisor.processes
    assert signals == []  # one worker still runs: the server goes on
    supervisor.processes[first] = _Exited(EXIT_WARM_UP_FAILED)
    for _ in range(server.WARM_UP_ATTEMPTS):
        supervisor.check()
    assert supervisor.processes == {}
    assert signals == [(os.getpid(), signal.SIGTERM)]


@pytest.mark.parametrize("exitcode", [1, -9])
def test_a_crash_between_warm_up_failures_starts_the_count_again(tmp_path, monkeypatch, exitcode):
    supervisor = _supervisor(tmp_path, workers=1)
    monkeypatch.setattr(supervisor, "spawn", lambda worker_id: None)
    (worker,) = supervisor.configs
    for code in [EXIT_WARM_UP_FAILED] * (server.WARM_UP_ATTEMPTS - 1) + [exitcode, EXIT_WARM_UP_FAILED]:
        supervisor.processes[worker] = _Exited(code)
        supervisor.check()
    assert worker in supervisor.processes
