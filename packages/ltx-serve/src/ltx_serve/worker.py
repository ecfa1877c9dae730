"""A warm worker: one process per device that keeps its model weights in memory and runs queued jobs.

Each job goes through the command-line path of the pipeline it names (`ltx_pipelines.<pipeline>.COMMAND`, one
of those the server was started with, `--pipelines`): the job's request becomes that command's flags, read and
checked by the same flag groups, then the command's build and generate -> save the denoised latents -> decode
-> write, as `python -m ltx_pipelines.<pipeline>` does. So the same seed and inputs give the same bytes as the
CLI. What stays warm is the weights: every model any of the worker's pipelines builds goes through one
`StateDictCache` kept for the worker's life, and Gemma stays loaded in a `ResidentTextEncoders` pool (unless
`--free-text-encoder`), so a job after the first of its pipeline loads no model.

Restart safety: the latents file is written beside the output before decoding (`save_latents_safely`). A job
whose output exists is only marked done; one whose latents exist is only decoded (`ltx_pipelines.decode`);
anything else starts from the beginning.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ltx_serve.jobs import Job, JobStore
from ltx_serve.pipelines import DEFAULT_PIPELINES, command_of
from ltx_serve.store import open_store

logger = logging.getLogger(__name__)

# The share of `progress` each phase ends at; denoising fills the span between prompt and decode by steps.
PROGRESS_AFTER = {"starting": 0, "prompt": 5, "denoise": 90, "decode": 98, "write": 99}


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process needs: each served pipeline's model flags (as typed for its CLI), its device and
    the shared places (data folder, queue)."""

    worker_id: str
    model_argv: Mapping[str, tuple[str, ...]]
    """Pipeline name -> its model flags: the pipelines this worker holds (`--pipelines`), warmed up in order."""
    data_dir: Path
    queue: str | None = None
    device: str | None = None
    poll_s: float = 0.2
    heartbeat_s: float = 2.0
    threads: int | None = None
    """CPU threads for torch (None: torch's default, every core): CPU workers split the cores between them."""
    resident_text_encoder: bool = True
    """Keep Gemma loaded between jobs (False: load and free it per job, for a card that cannot hold it beside
    the transformer)."""


def outputs_dir(data_dir: Path) -> Path:
    return data_dir / "outputs"


def output_path(data_dir: Path, job_id: str) -> Path:
    return outputs_dir(data_dir) / f"{job_id}.mp4"


def uploads_dir(data_dir: Path) -> Path:
    return data_dir / "uploads"


def job_argv(config: WorkerConfig, request: dict[str, Any], output: Path) -> list[str]:
    """The CLI flags of one job: the server's model flags for its pipeline, then the request's values (later
    flags win)."""
    argv = [*config.model_argv[request.get("pipeline", DEFAULT_PIPELINES[0])]]
    if config.device is not None:
        argv += ["--device", config.device]
    argv += [
        "--prompt",
        request["prompt"],
        "--seed",
        str(request["seed"]),
        "--height",
        str(request["height"]),
        "--width",
        str(request["width"]),
        "--num-frames",
        str(request["num_frames"]),
        "--frame-rate",
        str(request["frame_rate"]),
        "--output-path",
        str(output),
    ]
    if request.get("negative_prompt") is not None:
        argv += ["--negative-prompt", request["negative_prompt"]]
    for image in request.get("images", ()):
        argv += ["--image", image["path"], str(image["frame_idx"]), str(image["strength"])]
    for lora in request.get("loras", ()):
        argv += ["--lora", lora["path"], str(lora["strength"])]
    return argv


@dataclass
class JobProgress:
    """Reports a running job's phase and denoising step to the store (throttled to whole percents)."""

    store: JobStore | None
    """None: report nowhere (the warm-up run)."""
    job_id: str
    worker_id: str
    steps: int = 0
    step: int = 0
    phase: str = "starting"
    last: tuple[int, str, int] = (-1, "", -1)
    timings: dict[str, float] = field(default_factory=dict)
    _phase_start: float = field(default_factory=time.perf_counter)

    def enter(self, phase: str) -> None:
        now = time.perf_counter()
        self.timings[self.phase] = self.timings.get(self.phase, 0.0) + now - self._phase_start
        self._phase_start = now
        self.phase = phase
        self.report()

    def on_step(self) -> None:
        if self.phase == "prompt":  # the first transformer call ends prompt encoding
            self.enter("denoise")
        self.step += 1
        self.report()

    def percent(self) -> int:
        names = list(PROGRESS_AFTER)
        before = PROGRESS_AFTER[names[max(names.index(self.phase) - 1, 0)]]
        if self.phase == "denoise" and self.steps:
            span = PROGRESS_AFTER["denoise"] - before
            return before + span * min(self.step, self.steps) // self.steps
        return before

    def report(self) -> None:
        state = (self.percent(), self.phase, self.step)
        if state != self.last and self.store is not None:
            self.last = state
            self.store.progress(
                self.job_id, self.worker_id, progress=state[0], phase=self.phase, step=self.step, steps=self.steps
            )


class CachedModels:
    """The worker's model builder: `build_model` over one `StateDictCache` (the warm weights), with a hook on
    each transformer built that counts denoising steps for the running job."""

    def __init__(self) -> None:
        from ltx_core.loader import StateDictCache

        self.cache = StateDictCache()
        self.on_step: Callable[[], None] | None = None

    def __call__(self, spec: Any, source: Any, **options: Any) -> Any:
        from ltx_core.loader import build_model
        from ltx_core.model.transformer import AV_TRANSFORMER

        if options.get("cache") is None:
            options["cache"] = self.cache
        model = build_model(spec, source, **options)
        if spec.name == AV_TRANSFORMER.name:
            # A step is a transformer call (the distilled pipeline makes one per step; guidance may make more).
            model.register_forward_hook(lambda *_: self.on_step() if self.on_step is not None else None)
        return model


class JobCancelled(Exception):
    """The job was deleted while it ran."""


class Worker:
    """Runs claimed jobs one at a time through the command of the pipeline each names, with warm weights."""

    def __init__(self, config: WorkerConfig, store: JobStore) -> None:
        from ltx_core.text_encoders.gemma.resident import ResidentTextEncoders

        self.config = config
        self.store = store
        self.commands = {name: command_of(name) for name in config.model_argv}
        self.parsers = {name: command.parser(command.help_defaults()) for name, command in self.commands.items()}
        self.models = CachedModels()
        self.text_encoders = ResidentTextEncoders() if config.resident_text_encoder else None
        self.steps: dict[str, int] = {}
        """Transformer calls of the last run of each pipeline (fixed by its flags, not by a job's size): the
        next job's `steps`; unknown (0) for a pipeline's first run."""
        self.current: str | None = None
        self.report: JobProgress | None = None

    def warm_up(self, *, generate: bool = True) -> None:
        """Read each pipeline's model flags once (a bad flag stops the worker here, before it takes a job) and,
        with `generate`, load every model's weights into the cache by running one tiny job per pipeline that is
        thrown away."""
        folder = self.config.data_dir / "warmup" / self.config.worker_id
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name in self.commands:
            request = {"prompt": "warm-up", "pipeline": name, "seed": 0, "height": 64, "width": 64,
                       "num_frames": 9, "frame_rate": 25}  # fmt: skip
            run = self.read_run(name, job_argv(self.config, request, folder / f"{name}.mp4"))
            if generate:
                start = time.perf_counter()
                self.generate(name, run, JobProgress(None, "", self.config.worker_id), None)
                logger.info("worker %s: %s warm in %.1f s", self.config.worker_id, name, time.perf_counter() - start)
        shutil.rmtree(folder, ignore_errors=True)

    def read_run(self, pipeline: str, argv: list[str]) -> Any:
        """The checked CLI run of `argv` for `pipeline` (ValueError: a flag group refused a value; SystemExit
        from argparse is turned into ValueError too, so a bad request never stops the worker)."""
        from ltx_pipelines.cli.flag_group import FlagError

        try:
            args = self.parsers[pipeline].parse_args(argv)
            return self.commands[pipeline].read(args)
        except FlagError as e:
            raise ValueError(str(e)) from None
        except SystemExit as e:
            raise ValueError(f"the {pipeline} pipeline refused the flags {argv} (exit code {e.code})") from None

    def run_job(self, job: Job) -> Path:
        """Run `job` to its output file (resuming from its output or latents when a previous attempt left them)."""
        from ltx_pipelines.engine.generation import latents_path_for

        pipeline = job.request.get("pipeline", DEFAULT_PIPELINES[0])
        if pipeline not in self.commands:  # another server on the shared queue accepted it
            raise ValueError(f"pipeline {pipeline!r}: this worker holds {', '.join(self.commands)}")
        output = output_path(self.config.data_dir, job.id)
        output.parent.mkdir(parents=True, exist_ok=True)
        steps = self.steps.get(pipeline, 0)
        report = self.report = JobProgress(self.store, job.id, self.config.worker_id, steps=steps)
        if output.exists():
            logger.info("job %s: output already written by an earlier attempt", job.id)
            return output
        latents = latents_path_for(output)
        if latents.exists():
            logger.info("job %s: decoding the latents an earlier attempt saved", job.id)
            report.enter("decode")
            self.decode_saved(latents, output)
            report.enter("write")
            latents.unlink(missing_ok=True)
            return output
        run = self.read_run(pipeline, job_argv(self.config, job.request, output))
        return self.generate(pipeline, run, report, job.id)

    def generate(self, pipeline: str, run: Any, report: JobProgress, job_id: str | None) -> Path:
        """The CLI's run of `pipeline` with the worker's warm parts: its command builds the pipeline and
        generates; then save the latents, decode, write, drop the latents. The one place that calls into the
        pipelines."""
        from ltx_pipelines.cli.command import gc_skips_loaded_modules
        from ltx_pipelines.io.atomic_files import remove_stale_partials
        from ltx_serve.warm_run import warm_run

        command = self.commands[pipeline]
        run = warm_run(run, model_builder=self.models, resident_text_encoders=self.text_encoders, progress=False)
        calls = [0]

        def on_step() -> None:
            calls[0] += 1
            report.on_step()

        self.models.on_step = on_step
        try:
            with gc_skips_loaded_modules():
                built = command.build(run)
                report.enter("prompt")
                final = command.generate(built, run)
                self.steps[pipeline] = calls[0]
                self.check_cancelled(job_id)
                report.enter("decode")
                remove_stale_partials(run.output.path.parent)
                latents = command.save_latents(run, final)
                decoded = built.decode(final)
                self.check_cancelled(job_id)
                report.enter("write")
                written = command.write_decoded(run, decoded)
        finally:
            self.models.on_step = None
        if latents is not None:
            latents.unlink(missing_ok=True)
        report.enter("write")
        return written

    def decode_saved(self, latents: Path, output: Path) -> None:
        from ltx_pipelines import decode

        argv = ["--latents", str(latents), "--output-path", str(output)]
        if self.config.device is not None:
            argv += ["--device", self.config.device]
        code = decode.main(argv)
        if code != 0:
            raise RuntimeError(f"decoding the saved latents {latents} failed (exit code {code})")

    def check_cancelled(self, job_id: str | None) -> None:
        if job_id is not None and self.store.is_cancelled(job_id):
            raise JobCancelled(job_id)

    def serve_one(self) -> bool:
        """Claim and run one job; False when the queue was empty."""
        job = self.store.claim(self.config.worker_id)
        if job is None:
            return False
        self.current = job.id
        logger.info("worker %s: job %s (attempt %d)", self.config.worker_id, job.id, job.attempts)
        try:
            output = self.run_job(job)
        except JobCancelled:
            remove_job_files(self.config.data_dir, job.id)
            self.store.purge(job.id)
        except ValueError as e:  # the flag groups refused the request: retrying cannot help
            self.store.fail(
                job.id, self.config.worker_id, error={"code": "invalid_request", "message": str(e)}, retry=False
            )
        except Exception as e:
            logger.exception("job %s failed", job.id)
            self.store.fail(
                job.id, self.config.worker_id, error={"code": "generation_failed", "message": str(e)}, retry=False
            )
        else:
            if output != output_path(self.config.data_dir, job.id):
                os.replace(output, output_path(self.config.data_dir, job.id))
            timings = dict(self.report.timings) if self.report is not None else {}
            if not self.store.complete(job.id, self.config.worker_id, output=str(output), timings=timings):
                remove_job_files(self.config.data_dir, job.id)  # deleted while it ran
                self.store.purge(job.id)
        finally:
            self.current = None
        return True


def remove_job_files(data_dir: Path, job_id: str) -> None:
    """Every file a job left in the data folder (output, sidecar, latents, partials, upload)."""
    for folder in (outputs_dir(data_dir), uploads_dir(data_dir)):
        for path in folder.glob(f"{job_id}*"):
            path.unlink(missing_ok=True)
        for path in folder.glob(f".{job_id}*"):
            path.unlink(missing_ok=True)


def die_with_parent() -> None:
    """Ask Linux to kill this worker when its server dies (`kill -9` included): an orphan would go on running
    a job that the restarted server queues again."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def heartbeat_loop(worker: Worker, store: JobStore, stop: threading.Event, every_s: float) -> None:
    parent = os.getppid()
    while not stop.wait(every_s):
        if os.getppid() != parent:  # the server is gone (where the death signal is not available)
            os._exit(1)
        job_id = worker.current
        if job_id is not None:
            store.heartbeat(job_id, worker.config.worker_id)


EXIT_WARM_UP_FAILED = 3
"""A worker's exit code when it could not build (or warm up) its pipelines."""


def worker_main(config: WorkerConfig, ready: Any = None, warm_up: bool = True) -> None:
    """The worker process: build once, then claim jobs until killed."""
    from ltx_pipelines.cli.command import configure_logging

    die_with_parent()
    if config.threads is not None:
        import torch

        torch.set_num_threads(config.threads)
    configure_logging(os.environ.get("LTX_SERVE_LOG_LEVEL", "INFO"))
    store = open_store(config.queue, config.data_dir)
    worker = Worker(config, store)
    try:
        worker.warm_up(generate=warm_up)
    except Exception:
        # Models that cannot be built now will not build on a respawn either: say so with a code the
        # supervisor reads, instead of dying like a crash it restarts (a bad model file looped forever).
        logging.getLogger(__name__).exception("worker %s could not build its pipelines", config.worker_id)
        sys.stderr.flush()
        os._exit(EXIT_WARM_UP_FAILED)
    if ready is not None:
        ready.set()
    stop = threading.Event()
    # Its own connection: SQLite connections are not shared between threads that write at once.
    beat_store = open_store(config.queue, config.data_dir)
    threading.Thread(target=heartbeat_loop, args=(worker, beat_store, stop, config.heartbeat_s), daemon=True).start()
    while True:
        if not worker.serve_one():
            time.sleep(config.poll_s)


def with_worker_id(config: WorkerConfig, worker_id: str) -> WorkerConfig:
    return replace(config, worker_id=worker_id)
