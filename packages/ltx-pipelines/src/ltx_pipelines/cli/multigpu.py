"""Command lines of the `*_mgpu` pipelines: the single-device pipeline's flags plus `--num-gpus`,
`--mgpu-timeout`, on a two-stage pipeline `--stage-2-parallel` and `--stage-2-tile-overlap`, and on a guided one
`--guidance-parallel` (all recorded in the sidecar).

`python -m ltx_pipelines.<name>_mgpu --num-gpus N ...` is the controller: it checks the command
line (building the demo models once when `--demo`), and that N ranks can split the checkpoint's attention
heads, then starts N ranks (torch.multiprocessing, spawn, a free port; NCCL on CUDA, gloo with
`--device cpu`). Under `torchrun` (RANK, WORLD_SIZE, MASTER_ADDR/PORT set) the same module joins that
group instead. Every rank runs the pipeline; only rank 0 writes files. A failure on any rank ends all
ranks; the controller prints the failing rank's error and exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.command import PipelineCommand, Run, report_error, stop_signals_interrupt
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.request_flags import VideoFlags
from ltx_pipelines.engine.model_versions import (
    DEFAULT_STAGE_2_TILE_OVERLAP,
    STAGE_2_PARALLEL_MODES,
    Stage2Parallel,
)

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3600.0
VIDEO_PIXELS_PER_LATENT_CELL = 32


@dataclass(frozen=True)
class MultiGpuChoice:
    num_gpus: int
    """The world size (torchrun's WORLD_SIZE when --num-gpus was not given)."""
    timeout_s: float
    stage_2_parallel: Stage2Parallel
    stage_2_tile_overlap: int
    guidance_parallel: bool = False
    """Each guided step's passes spread over the ranks (`--guidance-parallel`)."""


def resolved_num_gpus(given: int | None) -> int:
    """`--num-gpus` as given, else torchrun's WORLD_SIZE, else 1."""
    from ltx_core.multigpu.launch import launched_by_torchrun

    if given is not None:
        return given
    return int(os.environ["WORLD_SIZE"]) if launched_by_torchrun() else 1


@dataclass(frozen=True)
class MultiGpuFlags(FlagGroup[MultiGpuChoice]):
    """`--num-gpus`, `--mgpu-timeout`; with `two_stage`, `--stage-2-parallel` (default: `default_stage_2`) and
    `--stage-2-tile-overlap`; `--guidance-parallel` (accepted only when `guided`: the command has a guided stage)."""

    default_stage_2: Stage2Parallel = "sequence"
    guided: bool = False
    two_stage: bool = True

    sections: tuple[FlagSection, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        stage_2 = (
            Flag(
                "--stage-2-parallel",
                {
                    "choices": STAGE_2_PARALLEL_MODES,
                    "default": self.default_stage_2,
                    "help": "Stage 2 over the ranks: 'sequence' (exactly the single-device result) or 'tiled' (one "
                    "overlapping spatial tile per rank, blended; faster at high resolution, an approximation). "
                    "Default: %(default)s.",
                },
            ),
            Flag(
                "--stage-2-tile-overlap",
                {
                    "type": int,
                    "default": DEFAULT_STAGE_2_TILE_OVERLAP,
                    "help": "Latent cells neighbouring stage-2 tiles share (default: %(default)s).",
                },
            ),
        )
        flags = (
            Flag(
                "--num-gpus",
                {
                    "type": int,
                    "default": None,
                    "help": "Processes (one per device) to spread the run over (default: WORLD_SIZE under torchrun, "
                    "else 1).",
                },
            ),
            Flag(
                "--mgpu-timeout",
                {
                    "type": float,
                    "default": DEFAULT_TIMEOUT_S,
                    "help": "Seconds after which a run whose ranks stopped answering is ended (default: %(default)s).",
                },
            ),
            *(stage_2 if self.two_stage else ()),
            Flag(
                "--guidance-parallel",
                {
                    "action": "store_true",
                    "help": "Guided stages: run each step's guidance passes (conditional, negative prompt, STG, "
                    "modality) on different GPUs, each a full-sequence call, sequence parallel inside groups when "
                    "there are more GPUs than passes (the single-device result; less traffic than sequence parallel "
                    "alone). Needs --num-gpus >= 2 and a guided pipeline.",
                },
            ),
        )
        object.__setattr__(self, "sections", (FlagSection("several devices", flags),))

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[MultiGpuChoice]:
        from ltx_core.multigpu.launch import launched_by_torchrun

        launched_world = int(os.environ["WORLD_SIZE"]) if launched_by_torchrun() else None
        num_gpus = resolved_num_gpus(args.num_gpus)
        if num_gpus < 1:
            raise FlagError(f"--num-gpus must be >= 1, got {num_gpus}")
        if launched_world is not None and num_gpus != launched_world:
            raise FlagError(f"--num-gpus {num_gpus} but torchrun started {launched_world} processes (WORLD_SIZE)")
        if args.mgpu_timeout <= 0:
            raise FlagError(f"--mgpu-timeout must be > 0 seconds, got {args.mgpu_timeout}")
        # A one-stage command has no stage-2 flags: its value keeps the defaults, which nothing reads.
        stage_2 = getattr(args, "stage_2_parallel", self.default_stage_2)
        overlap = getattr(args, "stage_2_tile_overlap", DEFAULT_STAGE_2_TILE_OVERLAP)
        if overlap < 0:
            raise FlagError(f"--stage-2-tile-overlap must be >= 0 latent cells, got {overlap}")
        if args.guidance_parallel:
            _check_guidance_parallel(self.guided, num_gpus)
        value = MultiGpuChoice(num_gpus, args.mgpu_timeout, stage_2, overlap, args.guidance_parallel)
        return Reading(value, record=self._record(value), pipeline_options=self._pipeline_options(value))

    def _pipeline_options(self, value: MultiGpuChoice) -> dict[str, Any]:
        """Every rank builds the single-device pipeline run over the ranks (`parallel`)."""
        from ltx_pipelines.engine.multigpu import MultiDevice

        return {"parallel": MultiDevice(value.stage_2_parallel, value.stage_2_tile_overlap, value.guidance_parallel)}

    def _record(self, value: MultiGpuChoice) -> dict[str, Any]:
        stage_2 = {"stage_2_parallel": value.stage_2_parallel, "stage_2_tile_overlap": value.stage_2_tile_overlap}
        return {
            "num_gpus": value.num_gpus,
            "mgpu_timeout": value.timeout_s,
            **(stage_2 if self.two_stage else {}),
            # Recorded only where it can be on: a distilled run's sidecar is what it was before the flag existed.
            **({"guidance_parallel": value.guidance_parallel} if self.guided else {}),
        }


def _check_guidance_parallel(guided: bool, num_gpus: int) -> None:
    if not guided:
        raise FlagError(
            "--guidance-parallel is not accepted by this command: it has no guided stage (no CFG/STG passes to "
            "spread); leave it out (--num-gpus alone runs sequence parallel)"
        )
    if num_gpus < 2:
        raise FlagError(f"--guidance-parallel needs --num-gpus >= 2 (one pass group per GPU), got {num_gpus}")


def check_ranks_can_split(run: Run) -> None:
    """The ranks must split the checkpoint's attention heads, and a tiled stage 2 must give each rank a tile
    (checked after `--demo` put its models in place, before any rank starts or loads a weight)."""
    from ltx_core.multigpu import check_config_heads_divide

    mgpu = run[MultiGpuFlags]
    if mgpu.num_gpus <= 1:
        return
    if mgpu.guidance_parallel:
        # Issue 38: the guided stage runs sequence parallel inside pass groups only (guidance_parallel_flags.py).
        from ltx_pipelines.cli.guidance_parallel_flags import check_guidance_parallel_run

        check_guidance_parallel_run(run, mgpu.num_gpus)
    else:
        try:
            check_config_heads_divide(run.models.transformer_config, mgpu.num_gpus)
        except ValueError as error:
            raise FlagError(f"--num-gpus {mgpu.num_gpus}: {error}") from None
    video = run.values.get(VideoFlags)
    two_stage = next(g for g in run.groups if isinstance(g, MultiGpuFlags)).two_stage
    if two_stage and mgpu.stage_2_parallel == "tiled" and video is not None and video.height and video.width:
        problem = tiled_stage_2_problem(mgpu.num_gpus, video.height, video.width, mgpu.stage_2_tile_overlap)
        if problem is not None:
            raise FlagError(problem)


def tiled_stage_2_problem(num_gpus: int, height: int, width: int, overlap: int) -> str | None:
    """Why a tiled stage 2 of a `height` x `width` output cannot give each of `num_gpus` ranks a tile (None
    when it can): the ranks would otherwise fail only after stage 1."""
    from ltx_core.latent_tiles import balanced_tile_counts, latent_tiles

    rows, columns = height // VIDEO_PIXELS_PER_LATENT_CELL, width // VIDEO_PIXELS_PER_LATENT_CELL
    tiles = len(latent_tiles((1, 1, 1, rows, columns), balanced_tile_counts(num_gpus, rows, columns, overlap)))
    if tiles >= num_gpus:
        return None
    return (
        f"--stage-2-parallel tiled: the {rows}x{columns} stage-2 latent of a {width}x{height} output splits into "
        f"{tiles} tiles, fewer than --num-gpus {num_gpus}; use --stage-2-parallel sequence, fewer GPUs or a "
        "larger output"
    )


@dataclass(frozen=True)
class MultiDeviceCommand:
    """The command line of a `*_mgpu` module: its single-device twin's groups plus the multi-device flags. Each
    rank builds the twin's pipeline on its own device with `parallel=MultiDevice(...)` (the flags' value).

    `main` is the controller: it checks the command line (building the demo models once when `--demo`), then
    starts the ranks (torch.multiprocessing, spawn, a free port; NCCL on CUDA, gloo with `--device cpu`). Under
    `torchrun` (RANK, WORLD_SIZE, MASTER_ADDR/PORT set) it joins that group instead. Every rank runs the
    pipeline; only rank 0 writes files."""

    command: PipelineCommand[Any]
    module: str
    """The importable module defining this command as `COMMAND` (ranks import it: a command holds functions
    that cannot be sent to a spawned process)."""

    @classmethod
    def of(
        cls,
        twin: PipelineCommand[Any],
        module_name: str,
        doc: str | None,
        *,
        default_stage_2: Stage2Parallel = "sequence",
    ) -> MultiDeviceCommand:
        module = sys.modules.get(module_name)
        spec = getattr(module, "__spec__", None)
        name = spec.name if spec is not None else module_name
        flags = MultiGpuFlags(default_stage_2, guided=_is_guided(twin), two_stage=_is_two_stage(twin))
        command = replace(
            twin,
            prog=f"python -m {name}",
            description=doc.splitlines()[0] if doc else None,
            groups=(*twin.groups, flags),
            check=_both(twin.check, check_ranks_can_split),
        )
        return cls(command, name)

    def parse(self, argv: Sequence[str] | None = None) -> Run:
        return self.command.parse(argv)

    def main(self, argv: Sequence[str] | None = None) -> int:
        argv = list(sys.argv[1:] if argv is None else argv)
        # Checked (bad flags exit 2) and the demo models built once here, before any rank starts.
        run = self.command.parse(argv)
        import torch
        import torch.distributed as dist

        from ltx_core.multigpu.launch import (
            RankFailedError,
            default_backend,
            init_process_group,
            launched_by_torchrun,
            run_ranks,
        )

        mgpu = run[MultiGpuFlags]
        device = run.runtime.device
        backend = default_backend(device)
        if launched_by_torchrun():
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            init_process_group(rank, world, backend, timeout_s=mgpu.timeout_s)
            try:
                rank_main(rank, world, self.module, argv, run)
            finally:
                dist.destroy_process_group()
            return 0
        if device.type == "cuda" and mgpu.num_gpus > torch.cuda.device_count():
            count = torch.cuda.device_count()
            print(f"error: --num-gpus {mgpu.num_gpus} but only {count} CUDA devices", file=sys.stderr)
            return 2
        # SIGTERM to the controller ends the ranks (run_ranks terminates them; rank 0 keeps its latents and
        # removes its temporaries as for Ctrl-C) and exits like Ctrl-C, with 143.
        with stop_signals_interrupt():
            try:
                run_ranks(rank_main, mgpu.num_gpus, args=(self.module, argv), backend=backend, timeout_s=mgpu.timeout_s)
            except RankFailedError as error:
                print(f"error: {error}", file=sys.stderr)
                return 1
            except KeyboardInterrupt as error:
                return report_error(error, debug=run.log_level == "DEBUG", output_path=run.output.path)
        return 0


def _is_guided(command: PipelineCommand[Any]) -> bool:
    from ltx_pipelines.cli.guidance_flags import GuidanceFlags

    return any(isinstance(group, GuidanceFlags) for group in command.groups)


def _is_two_stage(command: PipelineCommand[Any]) -> bool:
    from ltx_pipelines.cli.model_flags import ModelFlags

    return any(isinstance(group, ModelFlags) and group.two_stage for group in command.groups)


def _both(first: Callable[[Run], None] | None, second: Callable[[Run], None]) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        if first is not None:
            first(run)
        second(run)

    return check


def _rank_device(device: torch.device, rank: int) -> torch.device:
    import torch

    if device.type != "cuda":
        return device
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def rank_main(rank: int, world: int, module: str, argv: list[str], run: Run | None = None) -> None:
    """One rank's run (the process group is up) of the `COMMAND` of `module`: rank 0 runs the whole command
    and writes the outputs; the others run the same generation without writing. Raises when this rank failed."""
    import torch.distributed as dist

    command: PipelineCommand[Any] = importlib.import_module(module).COMMAND.command
    # `run`: the command line this process parsed already (under torchrun). A spawned rank parses its argv
    # once; rank 0 first, so it builds the demo models before the others look for them.
    if run is None and rank == 0:
        run = command.parse(argv)
    dist.barrier()
    if run is None:
        run = command.parse(argv)
    run = run.on_device(_rank_device(run.runtime.device, rank))
    if rank == 0:
        failures: list[BaseException] = []

        def generate(pipeline: Any, rank_run: Run) -> Any:
            try:
                return command.generate(pipeline, rank_run)
            except BaseException as error:  # kept so the controller can name it
                failures.append(error)
                raise

        code = replace(command, generate=generate).run(run)
        if code != 0:
            cause = f": {type(failures[0]).__name__}: {failures[0]}" if failures else " (its error is printed above)"
            raise RuntimeError(f"the pipeline failed on rank 0 with exit code {code}{cause}")
        return
    pipeline = command.build(run)
    # The video decode is tile-parallel: this rank decodes and sends its tiles (rank 0 writes).
    decoded = pipeline.decode(command.generate(pipeline, run))
    if getattr(decoded, "frames", ()):
        raise RuntimeError(f"rank {rank} received video frames; only rank 0 should")
