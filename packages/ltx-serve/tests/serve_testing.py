"""Starting `python -m ltx_serve --demo` on a free localhost port for the end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    data_dir: Path, *extra: str, port: int | None = None, log_name: str = "server.log"
) -> tuple[subprocess.Popen, str]:
    """The server process and its base URL, once /health answers (the workers may still be starting)."""
    port = port or free_port()
    log = open(data_dir.parent / log_name, "ab")  # noqa: SIM115 - the process writes it until the test ends
    process = subprocess.Popen(
        [sys.executable, "-m", "ltx_serve", "--demo", "--port", str(port), "--data-dir", str(data_dir), *extra],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "LTX_SERVE_LOG_LEVEL": "INFO"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return process, url
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    process.kill()
    raise RuntimeError(f"the server did not answer in 120 s; see {log.name}")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for(predicate, timeout: float, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not true after {timeout} s")


def playable_streams(path: Path) -> tuple[int, int]:
    """(video frames decoded, audio streams) of an mp4; raises if it does not play."""
    import av

    with av.open(str(path)) as container:
        audio = len(container.streams.audio)
        frames = sum(1 for _ in container.decode(video=0))
    return frames, audio


def get_text(url: str, timeout: float = 30) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


@contextlib.contextmanager
def postgres_server():
    """A real PostgreSQL from `pgserver` (skips the test without it); yields its URL. Its folder is outside
    pytest's (private to root) temp tree: as root, pgserver runs postgres as another user, who must reach it."""
    import pytest

    pgserver = pytest.importorskip("pgserver")
    folder = tempfile.mkdtemp(prefix="ltx-serve-pg-")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
