"""Command lines of the `*_mgpu` pipelines: `--num-gpus N` (and `--mgpu-timeout`) in front of the
single-device pipeline's own flags.

`python -m ltx_pipelines.<name>_mgpu --num-gpus N ...` is the controller: it checks the command
line (building the demo models once when `--demo`), then starts N ranks (torch.multiprocessing,
spawn, a free port; NCCL on CUDA, gloo with `--device cpu`). Under `torchrun` (RANK, WORLD_SIZE,
MASTER_ADDR/PORT set) the same module joins that group instead. Every rank runs the pipeline;
only rank 0 writes files. A failure on any rank ends all ranks; the controller prints the failing
rank's error and exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

from ltx_core.multigpu.launch import (
    RankFailedError,
    default_backend,
    init_process_group,
    launched_by_torchrun,
    run_ranks,
)
from ltx_pipelines.cli.runner import GuidedMain, ParsedRun, PipelineCli

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class MgpuArgs:
    num_gpus: int
    timeout_s: float
    rest: list[str]


def split_mgpu_args(prog: str, argv: Sequence[str]) -> MgpuArgs:
    """Take `--num-gpus` and `--mgpu-timeout` off `argv`; a bad value exits 2 naming what is accepted."""
    parser = argparse.ArgumentParser(prog=prog, add_help=False)
    parser.add_argument("--num-gpus", type=int, default=None)
    parser.add_argument("--mgpu-timeout", type=float, default=DEFAULT_TIMEOUT_S)
    known, rest = parser.parse_known_args(list(argv))
    if known.num_gpus is None:
        known.num_gpus = int(os.environ.get("WORLD_SIZE", "1"))
    if known.num_gpus < 1:
        parser.error(f"--num-gpus must be >= 1, got {known.num_gpus}")
    if known.mgpu_timeout <= 0:
        parser.error(f"--mgpu-timeout must be > 0 seconds, got {known.mgpu_timeout}")
    return MgpuArgs(known.num_gpus, known.mgpu_timeout, rest)


def _requested_device(argv: Sequence[str]) -> torch.device:
    """The `--device` the command line asks for (default: CUDA when present), read before the full parse."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--device", default=None)
    known, _ = probe.parse_known_args(list(argv))
    return torch.device(known.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def _rank_device(argv: Sequence[str], rank: int) -> torch.device:
    device = _requested_device(argv)
    if device.type != "cuda":
        return device
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def rank_main(rank: int, world: int, cli: PipelineCli, argv: list[str], build: Callable[..., Any]) -> None:
    """One rank's run (the process group is up): rank 0 runs the whole command and writes the
    outputs; the others run the same generation without writing. Raises when this rank failed."""
    device = _rank_device(argv, rank)
    if rank == 0:
        cli.parse(argv)  # builds the demo models (when asked) before the other ranks look for them
    dist.barrier()
    if rank == 0:
        failures: list[BaseException] = []

        def generate(run: ParsedRun):
            try:
                return build(run, device)(run.config.prompt, **cli.generation_options(run))
            except BaseException as error:  # kept so the controller can name it
                failures.append(error)
                raise

        code = cli.run(argv, generate)
        if code != 0:
            cause = f": {type(failures[0]).__name__}: {failures[0]}" if failures else " (its error is printed above)"
            raise RuntimeError(f"the pipeline failed on rank 0 with exit code {code}{cause}")
        return
    run = cli.parse(argv)
    generation = build(run, device)(run.config.prompt, **cli.generation_options(run))
    # The video decode is tile-parallel: this rank decodes and sends its tiles (rank 0 writes).
    for _ in generation.frames:
        raise RuntimeError(f"rank {rank} received video frames; only rank 0 should")


def main_mgpu(
    cli: PipelineCli, argv: Sequence[str] | None = None, *, build: Callable[[ParsedRun, torch.device], Any]
) -> int:
    """The `main()` of an mgpu pipeline module; `build(run, device)` makes the (mgpu) pipeline for one rank."""
    argv = list(sys.argv[1:] if argv is None else argv)
    mgpu = split_mgpu_args(cli.prog, argv)
    backend = default_backend(_requested_device(mgpu.rest))
    if launched_by_torchrun():
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        init_process_group(rank, world, backend, timeout_s=mgpu.timeout_s)
        try:
            rank_main(rank, world, cli, mgpu.rest, build)
        finally:
            dist.destroy_process_group()
        return 0
    # Checked (bad flags exit 2) and the demo models built once here, before any rank starts.
    cli.parse(mgpu.rest)
    device = _requested_device(mgpu.rest)
    if device.type == "cuda" and mgpu.num_gpus > torch.cuda.device_count():
        print(f"error: --num-gpus {mgpu.num_gpus} but only {torch.cuda.device_count()} CUDA devices", file=sys.stderr)
        return 2
    try:
        run_ranks(rank_main, mgpu.num_gpus, args=(cli, mgpu.rest, build), backend=backend, timeout_s=mgpu.timeout_s)
    except RankFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


@dataclass(frozen=True)
class GuidedMgpuBuild:
    """`build(run, device)` of a guided mgpu pipeline: its single-device twin's constructor arguments
    (`PipelineCli.build_guided` plus the twin's extra options) with this rank's device."""

    cli: PipelineCli
    pipeline_class: type
    extra_options: Callable[[ParsedRun], dict[str, Any]] | None = None

    def __call__(self, run: ParsedRun, device: torch.device) -> Any:
        run = replace(run, config=replace(run.config, device=device))
        extra = self.extra_options(run) if self.extra_options is not None else {}
        return self.cli.build_guided(self.pipeline_class, run, **extra)


def guided_mgpu_main(twin: GuidedMain, pipeline_class: type, prog: str, description: str | None) -> Callable[..., int]:
    """The `main(argv=None)` of the mgpu variant of a guided pipeline whose own main is `twin`."""
    base = twin.cli
    cli = PipelineCli(
        prog=prog,
        description=description,
        layout=base.layout,
        extra_args=base.extra_args,
        fixed_defaults=base.fixed_defaults,
    )
    build = GuidedMgpuBuild(cli, pipeline_class, twin.extra_options)
    return partial(main_mgpu, cli, build=build)
