"""`python -m ltx_serve`: the API process and its warm workers.

Server flags are read here; every other flag is the pipelines' (`--demo`, model files, `hf://`, `--lora`,
`--quantization`, `--offload`, ...) and goes to each served pipeline (`--pipelines`) that takes it, as it
would go to `python -m ltx_pipelines.<pipeline>`, checked once at start-up. One worker process per
`--devices` entry (or `--workers N` on the CPU), each restarted if it dies; its job is queued again
(`requeue_stale`).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_serve.jobs import JobStore
from ltx_serve.pipelines import DEFAULT_PIPELINES, SERVABLE, parse_pipelines, split_model_argv
from ltx_serve.requests import Limits, served_pipelines
from ltx_serve.store import SqliteJobStore, open_store
from ltx_serve.worker import EXIT_WARM_UP_FAILED, WorkerConfig, remove_job_files, worker_main

logger = logging.getLogger(__name__)

API_KEY_ENV = "LTX_SERVE_API_KEY"
WARM_UP_ATTEMPTS = 3
"""Times in a row a worker may fail to build its pipelines before the supervisor stops restarting it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ltx_serve",
        description="Serve LTX-2 pipelines behind an OpenAI-style /v1/videos API. Flags not listed here are the "
        "pipelines' (as for python -m ltx_pipelines.distilled: --demo, model files, --lora, ...); each served "
        "pipeline takes those its command line has.",
    )
    parser.add_argument(
        "--pipelines",
        default=",".join(DEFAULT_PIPELINES),
        help=f"The pipelines every worker holds, comma-separated, the first a request's default (default: "
        f"{','.join(DEFAULT_PIPELINES)}; accepted: {', '.join(SERVABLE)}). The guided ones take a negative prompt.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind (default: localhost only).")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("ltx-serve-data"),
        help="Holds the job database (jobs.sqlite3) and the outputs (default: ./ltx-serve-data).",
    )
    parser.add_argument(
        "--queue",
        default=None,
        help="postgresql://... to share one queue between servers (default: SQLite in --data-dir).",
    )
    parser.add_argument("--devices", default=None, help="One worker per device, e.g. cuda:0,cuda:1.")
    parser.add_argument("--workers", type=int, default=None, help="Number of CPU workers (default 1).")
    parser.add_argument("--api-key", default=None, help=f"Require this bearer token (or set {API_KEY_ENV}).")
    parser.add_argument(
        "--allow-remote-without-key",
        action="store_true",
        help="Bind a non-local --host without an API key (refused otherwise).",
    )
    parser.add_argument("--max-queued", type=int, default=64, help="Queued jobs before 429 (default 64).")
    parser.add_argument("--max-attempts", type=int, default=3, help="Runs per job before it fails (default 3).")
    parser.add_argument("--max-width", type=int, default=Limits.max_width)
    parser.add_argument("--max-height", type=int, default=Limits.max_height)
    parser.add_argument("--max-frames", type=int, default=Limits.max_frames)
    parser.add_argument("--max-seconds", type=float, default=Limits.max_seconds)
    parser.add_argument("--max-prompt-chars", type=int, default=Limits.max_prompt_chars)
    parser.add_argument("--max-body-bytes", type=int, default=Limits.max_body_bytes)
    parser.add_argument(
        "--default-size", default=None, help="Size when a request gives none (default 768x512; 64x64 with --demo)."
    )
    parser.add_argument("--no-warmup", action="store_true", help="Workers load weights on their first job.")
    parser.add_argument(
        "--free-text-encoder",
        action="store_true",
        help="Load and free Gemma for every job instead of keeping it resident beside the other models (a card "
        "that cannot hold both; each job then pays Gemma's load).",
    )
    parser.add_argument(
        "--stale-after",
        type=float,
        default=30.0,
        help="Seconds without a heartbeat before another server requeues a running job.",
    )
    return parser


@dataclass
class ServeOptions:
    host: str
    port: int
    data_dir: Path
    queue: str | None
    devices: list[str | None]
    api_key: str | None
    limits: Limits
    model_argv: dict[str, tuple[str, ...]]
    """Served pipeline -> the pipeline flags it takes (the LoRAs left out: each job adds them)."""
    max_queued: int
    max_attempts: int
    warm_up: bool
    stale_after_s: float
    resident_text_encoder: bool = True
    """Workers keep Gemma loaded between jobs (`--free-text-encoder`: load and free it per job)."""
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}")


def loras_of(model_argv: Sequence[str]) -> dict[str, str]:
    """The `--lora PATH [STRENGTH]` files in the pipeline flags, by file stem (how requests name them)."""
    loras = {}
    for i, arg in enumerate(model_argv):
        if arg == "--lora" and i + 1 < len(model_argv):
            path = model_argv[i + 1]
            loras[Path(path).stem] = path
    return loras


def without_loras(model_argv: Sequence[str]) -> tuple[str, ...]:
    """The pipeline flags less `--lora PATH [STRENGTH]` (the worker adds each job's LoRAs with its strengths)."""
    out: list[str] = []
    i = 0
    while i < len(model_argv):
        if model_argv[i] == "--lora":
            i += 2  # the flag and its path
            if i < len(model_argv) and _is_number(model_argv[i]):
                i += 1  # its strength
            continue
        out.append(model_argv[i])
        i += 1
    return tuple(out)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_options(argv: Sequence[str] | None = None) -> ServeOptions:
    parser = build_parser()
    args, model_argv = parser.parse_known_args(argv)
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    local = args.host in ("127.0.0.1", "localhost", "::1")
    if not local and api_key is None and not args.allow_remote_without_key:
        parser.error(
            f"--host {args.host}: serving beyond localhost needs --api-key (or {API_KEY_ENV}), "
            "or --allow-remote-without-key"
        )
    if args.devices and args.workers:
        parser.error("--devices and --workers: give one (a worker per device, or N CPU workers)")
    devices: list[str | None] = [d.strip() for d in args.devices.split(",")] if args.devices else [None]
    if args.workers is not None:
        if args.workers < 1:
            parser.error(f"--workers {args.workers}: at least 1")
        devices = ["cpu"] * args.workers
    try:
        pipelines = parse_pipelines(args.pipelines)
        per_pipeline = split_model_argv(pipelines, without_loras(model_argv))
    except ValueError as e:
        parser.error(str(e))
    demo = "--demo" in model_argv
    limits = Limits(
        max_width=args.max_width,
        max_height=args.max_height,
        max_frames=args.max_frames,
        max_seconds=args.max_seconds,
        max_prompt_chars=args.max_prompt_chars,
        max_body_bytes=args.max_body_bytes,
        default_size=args.default_size or ("64x64" if demo else Limits.default_size),
        default_seconds="0.36" if demo else Limits.default_seconds,
        loras=loras_of(model_argv),
        pipelines=served_pipelines(pipelines),
    )
    return ServeOptions(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir.expanduser().resolve(),
        queue=args.queue,
        devices=devices,
        api_key=api_key,
        limits=limits,
        model_argv=per_pipeline,
        max_queued=args.max_queued,
        max_attempts=args.max_attempts,
        warm_up=not args.no_warmup,
        resident_text_encoder=not args.free_text_encoder,
        stale_after_s=args.stale_after,
    )


class Supervisor:
    """Keeps one worker process per device alive; requeues the job of a worker that died and stops a worker
    whose job was deleted while it ran (then starts a fresh one)."""

    def __init__(self, options: ServeOptions, store: JobStore) -> None:
        cpu_workers = sum(1 for d in options.devices if d in (None, "cpu"))
        # Workers sharing the CPU split its cores; each using all of them would only make them fight.
        threads = max(1, (os.cpu_count() or 1) // cpu_workers) if cpu_workers > 1 else None
        self.options = options
        self.store = store
        self.context = multiprocessing.get_context("spawn")
        self.processes: dict[str, Any] = {}
        self.configs = {
            f"{options.instance}-w{i}": WorkerConfig(
                worker_id=f"{options.instance}-w{i}",
                model_argv=options.model_argv,
                data_dir=options.data_dir,
                queue=options.queue,
                device=device,
                threads=threads if device in (None, "cpu") else None,
                resident_text_encoder=options.resident_text_encoder,
            )
            for i, device in enumerate(options.devices)
        }
        self.stop = threading.Event()
        self.warm_up_failures: dict[str, int] = {}

    def start(self) -> None:
        for worker_id in self.configs:
            self.spawn(worker_id)
        threading.Thread(target=self.watch, daemon=True).start()

    def spawn(self, worker_id: str) -> None:
        process = self.context.Process(
            target=worker_main, args=(self.configs[worker_id], None, self.options.warm_up), daemon=True
        )
        process.start()
        self.processes[worker_id] = process

    def watch(self) -> None:
        while not self.stop.wait(0.5):
            try:
                self.check()
            except Exception:
                logger.exception("supervisor check failed")

    def check(self) -> None:
        for worker_id, process in list(self.processes.items()):
            cancelled = self.store.cancelled_claim(worker_id)
            if cancelled is not None and process.is_alive():
                logger.info("job %s deleted while running: restarting worker %s", cancelled, worker_id)
                process.kill()
                process.join()
            if not process.is_alive():
                if cancelled is not None:
                    remove_job_files(self.options.data_dir, cancelled)
                    self.store.purge(cancelled)
                self.store.requeue_worker(worker_id)
                if self.gives_up(worker_id, process.exitcode):
                    continue
                logger.warning("worker %s exited (%s); starting it again", worker_id, process.exitcode)
                self.spawn(worker_id)
        self.store.requeue_stale(older_than_s=self.options.stale_after_s)

    def gives_up(self, worker_id: str, exitcode: int | None) -> bool:
        """Whether a worker that exited stays down: it could not build its pipelines `WARM_UP_ATTEMPTS` times in
        a row (a bad or missing model file, too little memory). A server left without workers stops (SIGTERM
        to itself): its queued jobs stay queued for a server that can run them."""
        if exitcode != EXIT_WARM_UP_FAILED:
            self.warm_up_failures.pop(worker_id, None)
            return False
        failures = self.warm_up_failures[worker_id] = self.warm_up_failures.get(worker_id, 0) + 1
        if failures < WARM_UP_ATTEMPTS:
            return False
        del self.processes[worker_id]
        logger.error("worker %s could not build its pipelines %d times (see its error above); not restarted",
                     worker_id, failures)  # fmt: skip
        if not self.processes:
            logger.error("no worker can run: stopping the server (queued jobs stay queued)")
            os.kill(os.getpid(), signal.SIGTERM)
        return True

    def shutdown(self) -> None:
        self.stop.set()
        for process in self.processes.values():
            process.kill()
        for process in self.processes.values():
            process.join()


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    from ltx_pipelines.cli.command import configure_logging
    from ltx_serve.api import ApiConfig, create_app

    options = parse_options(argv)
    configure_logging(os.environ.get("LTX_SERVE_LOG_LEVEL", "INFO"))
    store = open_store(options.queue, options.data_dir)
    if isinstance(store, SqliteJobStore):
        # One server per SQLite file: whatever was running belonged to a server that is gone.
        requeued = store.requeue_stale(older_than_s=None)
        if requeued:
            logger.info("requeued %d jobs left running by the previous start", len(requeued))
    # Its own connection: the supervisor thread writes while the API does.
    supervisor = Supervisor(options, open_store(options.queue, options.data_dir))
    supervisor.start()
    app = create_app(
        ApiConfig(
            store=store,
            data_dir=options.data_dir,
            limits=options.limits,
            api_key=options.api_key,
            max_queued=options.max_queued,
            max_attempts=options.max_attempts,
        )
    )
    started = time.time()
    logger.info("serving on http://%s:%d (data in %s)", options.host, options.port, options.data_dir)
    try:
        uvicorn.run(app, host=options.host, port=options.port, log_level="warning")
    finally:
        supervisor.shutdown()
        logger.info("stopped after %.0f s", time.time() - started)
    return 0
