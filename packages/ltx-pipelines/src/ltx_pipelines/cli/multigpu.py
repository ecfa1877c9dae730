"""Command lines of the `*_mgpu` pipelines: the single-device pipeline's flags plus `--num-gpus`,
`--mgpu-timeout`, `--stage-2-parallel` and `--stage-2-tile-overlap` (all recorded in the sidecar).

`python -m ltx_pipelines.<name>_mgpu --num-gpus N ...` is the controller: it checks the command
line (building the demo models once when `--demo`), and that N ranks can split the checkpoint's attention
heads, then starts N ranks (torch.multiprocessing, spawn, a free port; NCCL on CUDA, gloo with
`--device cpu`). Under `torchrun` (RANK, WORLD_SIZE, MASTER_ADDR/PORT set) the same module joins that
group instead. Every rank runs the pipeline; only rank 0 writes files. A failure on any rank ends all
ranks; the controller prints the failing rank's error and exits 1.
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

from ltx_core.latent_tiles import balanced_tile_counts, latent_tiles
from ltx_core.loader.safetensors_header import read_checkpoint_config
from ltx_core.multigpu import check_config_heads_divide
from ltx_core.multigpu.launch import (
    RankFailedError,
    default_backend,
    init_process_group,
    launched_by_torchrun,
    run_ranks,
)
from ltx_pipelines.cli.run_config import RunConfig
from ltx_pipelines.cli.runner import GuidedMain, ParsedRun, PipelineCli
from ltx_pipelines.engine.defaults import PipelineDefaults
from ltx_pipelines.engine.multigpu import (
    DEFAULT_STAGE_2_TILE_OVERLAP,
    STAGE_2_PARALLEL_MODES,
    MultiDevice,
    Stage2Parallel,
)
from ltx_pipelines.engine.prompt_pipeline import PromptPipeline

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3600.0
VIDEO_PIXELS_PER_LATENT_CELL = 32


@dataclass(frozen=True)
class MgpuArgs:
    num_gpus: int
    timeout_s: float


def add_mgpu_args(parser: argparse.ArgumentParser, default_stage_2: Stage2Parallel) -> None:
    group = parser.add_argument_group("several devices")
    group.add_argument(
        "--num-gpus", type=int, default=None,
        help="Processes (one per device) to spread the run over (default: WORLD_SIZE under torchrun, else 1).",
    )  # fmt: skip
    group.add_argument(
        "--mgpu-timeout", type=float, default=DEFAULT_TIMEOUT_S,
        help="Seconds after which a run whose ranks stopped answering is ended (default: %(default)s).",
    )  # fmt: skip
    group.add_argument(
        "--stage-2-parallel", choices=STAGE_2_PARALLEL_MODES, default=default_stage_2,
        help="Stage 2 over the ranks: 'sequence' (exactly the single-device result) or 'tiled' (one overlapping "
        "spatial tile per rank, blended; faster at high resolution, an approximation). Default: %(default)s.",
    )  # fmt: skip
    group.add_argument(
        "--stage-2-tile-overlap", type=int, default=DEFAULT_STAGE_2_TILE_OVERLAP,
        help="Latent cells neighbouring stage-2 tiles share (default: %(default)s).",
    )  # fmt: skip


def resolved_num_gpus(given: int | None) -> int:
    """`--num-gpus` as given, else torchrun's WORLD_SIZE, else 1."""
    if given is not None:
        return given
    return int(os.environ["WORLD_SIZE"]) if launched_by_torchrun() else 1


def split_mgpu_args(prog: str, argv: Sequence[str]) -> MgpuArgs:
    """`--num-gpus` and `--mgpu-timeout` read ahead of the full parse (the controller and torchrun need them
    first); a bad value exits 2 naming what is accepted."""
    parser = argparse.ArgumentParser(prog=prog, add_help=False)
    add_mgpu_args(parser, "sequence")
    known, _ = parser.parse_known_args(list(argv))
    launched_world = int(os.environ["WORLD_SIZE"]) if launched_by_torchrun() else None
    num_gpus = resolved_num_gpus(known.num_gpus)
    if num_gpus < 1:
        parser.error(f"--num-gpus must be >= 1, got {num_gpus}")
    if launched_world is not None and num_gpus != launched_world:
        parser.error(f"--num-gpus {num_gpus} but torchrun started {launched_world} processes (WORLD_SIZE)")
    if known.mgpu_timeout <= 0:
        parser.error(f"--mgpu-timeout must be > 0 seconds, got {known.mgpu_timeout}")
    if known.stage_2_tile_overlap < 0:
        parser.error(f"--stage-2-tile-overlap must be >= 0 latent cells, got {known.stage_2_tile_overlap}")
    return MgpuArgs(num_gpus, known.mgpu_timeout)


class MgpuCli(PipelineCli):
    """A single-device pipeline's command line with the multi-device flags added and checked."""

    def __init__(self, *, default_stage_2: Stage2Parallel = "sequence", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.default_stage_2 = default_stage_2

    def build_parser(self, defaults: PipelineDefaults) -> argparse.ArgumentParser:
        parser = super().build_parser(defaults)
        add_mgpu_args(parser, self.default_stage_2)
        return parser

    def check_extra(
        self, parser: argparse.ArgumentParser, args: argparse.Namespace, config: RunConfig
    ) -> dict[str, Any]:
        return {
            "num_gpus": resolved_num_gpus(args.num_gpus),
            "stage_2_parallel": args.stage_2_parallel,
            "stage_2_tile_overlap": args.stage_2_tile_overlap,
        }

    def parse(self, argv: Sequence[str] | None = None) -> ParsedRun:
        """The pipeline's parse, then a check that the ranks can split the checkpoint's attention heads
        (after `--demo` put its models in place), before any rank starts or loads a weight."""
        run = super().parse(argv)
        num_gpus = run.extra["num_gpus"]
        if num_gpus > 1:
            transformer = read_checkpoint_config(run.checkpoint_path).get("transformer", {})
            try:
                check_config_heads_divide(transformer, num_gpus)
            except ValueError as error:
                self.build_parser(run.defaults).error(f"--num-gpus {num_gpus}: {error}")
            if run.extra["stage_2_parallel"] == "tiled":
                overlap = run.extra["stage_2_tile_overlap"]
                problem = tiled_stage_2_problem(num_gpus, run.config.height, run.config.width, overlap)
                if problem is not None:
                    self.build_parser(run.defaults).error(problem)
        return run

    def sidecar_parameters(self, run: ParsedRun) -> dict[str, Any]:
        # The world size actually used (torchrun's when --num-gpus was not given).
        return {**super().sidecar_parameters(run), "num_gpus": run.extra["num_gpus"]}


def tiled_stage_2_problem(num_gpus: int, height: int, width: int, overlap: int) -> str | None:
    """Why a tiled stage 2 of a `height` x `width` output cannot give each of `num_gpus` ranks a tile (None
    when it can): the ranks would otherwise fail only after stage 1."""
    rows, columns = height // VIDEO_PIXELS_PER_LATENT_CELL, width // VIDEO_PIXELS_PER_LATENT_CELL
    tiles = len(latent_tiles((1, 1, 1, rows, columns), balanced_tile_counts(num_gpus, rows, columns, overlap)))
    if tiles >= num_gpus:
        return None
    return (
        f"--stage-2-parallel tiled: the {rows}x{columns} stage-2 latent of a {width}x{height} output splits into "
        f"{tiles} tiles, fewer than --num-gpus {num_gpus}; use --stage-2-parallel sequence, fewer GPUs or a "
        "larger output"
    )


def mgpu_options(run: ParsedRun) -> dict[str, Any]:
    """The multi-device constructor option of a checked command line: `parallel`, the pipeline's ranks."""
    return {"parallel": MultiDevice(run.extra["stage_2_parallel"], run.extra["stage_2_tile_overlap"])}


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
    backend = default_backend(_requested_device(argv))
    if launched_by_torchrun():
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        init_process_group(rank, world, backend, timeout_s=mgpu.timeout_s)
        try:
            rank_main(rank, world, cli, argv, build)
        finally:
            dist.destroy_process_group()
        return 0
    # Checked (bad flags exit 2) and the demo models built once here, before any rank starts.
    cli.parse(argv)
    device = _requested_device(argv)
    if device.type == "cuda" and mgpu.num_gpus > torch.cuda.device_count():
        print(f"error: --num-gpus {mgpu.num_gpus} but only {torch.cuda.device_count()} CUDA devices", file=sys.stderr)
        return 2
    try:
        run_ranks(rank_main, mgpu.num_gpus, args=(cli, argv, build), backend=backend, timeout_s=mgpu.timeout_s)
    except RankFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


@dataclass(frozen=True)
class GuidedMgpuBuild:
    """`build(run, device)` of a guided mgpu pipeline: its single-device twin's class and constructor arguments
    (`PipelineCli.build_guided` plus the twin's extra options) with this rank's device and `parallel`."""

    cli: PipelineCli
    pipeline_class: type[PromptPipeline]
    extra_options: Callable[[ParsedRun], dict[str, Any]] | None = None

    def __call__(self, run: ParsedRun, device: torch.device) -> Any:
        run = replace(run, config=replace(run.config, device=device))
        extra = self.extra_options(run) if self.extra_options is not None else {}
        return self.cli.build_guided(self.pipeline_class, run, **extra, **mgpu_options(run))


def guided_mgpu_main(
    twin: GuidedMain, *, default_stage_2: Stage2Parallel, prog: str, description: str | None
) -> Callable[..., int]:
    """The `main(argv=None)` of the mgpu variant of a guided pipeline whose own main is `twin`: the twin's
    pipeline class, built with `parallel=MultiDevice(...)` from the multi-device flags."""
    base = twin.cli
    cli = MgpuCli(
        prog=prog,
        description=description,
        layout=base.layout,
        extra_args=base.extra_args,
        fixed_defaults=base.fixed_defaults,
        default_stage_2=default_stage_2,
    )
    build = GuidedMgpuBuild(cli, twin.pipeline_class, twin.extra_options)
    return partial(main_mgpu, cli, build=build)
