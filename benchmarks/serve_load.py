"""`python -m ltx_serve --demo` under load, on the CPU (64x64, 9 frames per job).

Parts (`--part`, default all):
  latency     submit-to-first-denoising-step on a warm worker, the warm job's wall time, and the CLI's
              cold run of the same job (`python -m ltx_pipelines.distilled --demo`, a fresh process)
  throughput  jobs per minute with 1 and 2 workers (`--jobs` jobs from 8 concurrent clients)

The load check (8 clients, 40 jobs, 2 CPU workers, `kill -9` and restart; every job ends completed or failed
with a reason, each output plays, none doubled) is a test: packages/ltx-serve/tests/test_load.py.

    uv run python benchmarks/serve_load.py --part throughput --jobs 40
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

JOB = {"size": "64x64", "extra_body": {"num_frames": 9, "frame_rate": 25}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(data: Path, workers: int, *extra: str) -> tuple[subprocess.Popen, openai.OpenAI]:
    port = free_port()
    log = open(data.parent / f"server-{port}.log", "ab")  # noqa: SIM115 - the server writes it while it runs
    process = subprocess.Popen(
        [sys.executable, "-m", "ltx_serve", "--demo", "--port", str(port), "--data-dir", str(data),
         "--workers", str(workers), "--max-queued", "1000", *extra],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                break
        except OSError:
            time.sleep(0.2)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=2)
    return process, client


def wait_workers_warm(client: openai.OpenAI, workers: int) -> None:
    """Run one job per worker so every worker has its weights (the warm-up job runs before any claim)."""
    ids = [client.videos.create(prompt="warm", **JOB).id for _ in range(workers)]
    wait_done(client, ids)


def wait_done(client: openai.OpenAI, ids: list[str], timeout: float = 3600) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        videos = [client.videos.retrieve(i) for i in ids]
        if all(v.status in ("completed", "failed") for v in videos):
            return videos
        time.sleep(0.5)
    raise TimeoutError(f"jobs not done after {timeout} s")


def submit_concurrently(client: openai.OpenAI, jobs: int, clients: int = 8) -> list[str]:
    def one(i: int) -> str:
        return client.videos.create(prompt=f"clip {i}", **{**JOB, "extra_body": {**JOB["extra_body"], "seed": i}}).id

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(jobs)))


def latency(root: Path) -> None:
    process, client = start(root / "latency", 1)
    try:
        wait_workers_warm(client, 1)
        submitted = time.perf_counter()
        video = client.videos.create(prompt="latency", **JOB)
        while client.videos.retrieve(video.id).model_extra["step"] < 1:
            time.sleep(0.02)
        first_step = time.perf_counter() - submitted
        (done,) = wait_done(client, [video.id])
        warm_wall = time.perf_counter() - submitted
    finally:
        process.kill()
    out = root / "cli.mp4"
    start_cli = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ltx_pipelines.distilled", "--demo", "--prompt", "latency", "--height", "64",
         "--width", "64", "--num-frames", "9", "--output-path", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    cli_cold = time.perf_counter() - start_cli
    print(f"submit -> first denoising step on a warm worker: {first_step:.2f} s")
    print(f"warm job wall time (submit -> completed): {warm_wall:.2f} s ({done.status})")
    print(f"CLI cold run of the same job (fresh process): {cli_cold:.2f} s  -> warm/cold {warm_wall / cli_cold:.2f}")


def throughput(root: Path, jobs: int) -> None:
    for workers in (1, 2):
        process, client = start(root / f"throughput-{workers}", workers)
        try:
            wait_workers_warm(client, workers)
            began = time.perf_counter()
            ids = submit_concurrently(client, jobs)
            videos = wait_done(client, ids)
            minutes = (time.perf_counter() - began) / 60
        finally:
            process.kill()
        ok = sum(v.status == "completed" for v in videos)
        print(f"{workers} worker(s): {jobs} jobs in {minutes * 60:.0f} s = {ok / minutes:.1f} jobs/min ({ok} ok)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("latency", "throughput", "all"), default="all")
    parser.add_argument("--jobs", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ltx-serve-bench-"))
    print(f"(work folder {root})")
    if args.part in ("latency", "all"):
        latency(root)
    if args.part in ("throughput", "all"):
        throughput(root, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
