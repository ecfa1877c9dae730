"""A pipeline's command line: the flag groups it uses, what it builds and how it calls it. Every
`python -m ltx_pipelines.<name>` module's `main` is `PipelineCommand.main`.

`main(argv)` parses argv once, reads each group into its typed value (a bad value exits with code 2 before any
model is built or written, the demo models included), substitutes the demo models when asked, resolves the model
files (hf:// downloads, kinds), settles the values that depend on them, builds the pipeline, generates the final
latents, saves them, decodes them and writes the output with its sidecar. A later failure ends in one line on
stderr and exit code 1 (`run_reporting_errors`, `describe_error`); after denoising, the line names the saved
latents and the `ltx_pipelines.decode` command that finishes the run.

A failed run ends in one line naming what failed and what to do. Bad arguments never get here (argparse and
validation exit with code 2 before any model is built). Everything raised later - a checkpoint whose keys or shapes
do not fit, a Gemma folder of the wrong width, an image that turns out truncated, a full disk, exhausted memory -
is turned into one line on stderr; the traceback is printed only with `--log-level DEBUG`.

A command module names its pipeline's classes without importing them (`forward_to`, `resolve`): `python -m
ltx_pipelines.<name> --help` and the flag checks run before torch is imported (seconds saved on every bad command
line).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, TextIO, TypeVar

from ltx_core.command_parser import CommandParser
from ltx_core.model.video_vae.tiling_config import TilingConfig
from ltx_core.write_errors import is_disk_full
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, MemoryInputs, ReadContext, Reading, add_groups
from ltx_pipelines.cli.guidance_flags import GuidanceFlags
from ltx_pipelines.cli.model_flags import ModelChoice, ModelFlags
from ltx_pipelines.cli.model_resolution import RunModels, resolve_models
from ltx_pipelines.cli.request_flags import PromptFlags, VideoFlags
from ltx_pipelines.cli.runtime_flags import (
    OutputChoice,
    OutputFlags,
    RuntimeFlags,
    TilingChoice,
    TilingFlags,
)
from ltx_pipelines.cli.step_cache_flags import StepCacheFlags
from ltx_pipelines.engine.model_versions import PipelineDefaults
from ltx_pipelines.io.atomic_files import OutputExistsError
from ltx_pipelines.io.errors import MediaError

if TYPE_CHECKING:
    import torch

    from ltx_core.generation_memory import GenerationSizes, GenerationWorkload
    from ltx_pipelines.engine.denoising_stage import FinalLatents
    from ltx_pipelines.engine.generation import AudioGeneration, Generation, RunOutput

    pass

logger = logging.getLogger(__name__)


P = TypeVar("P")


V = TypeVar("V")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


# The demo's random tiny models give noise at any size: keep it small so it runs in seconds on a CPU.
DEMO_SIZE = {"height": 128, "width": 192, "num_frames": 17}


def demo_defaults(defaults: PipelineDefaults, *, two_stage: bool) -> PipelineDefaults:
    """The demo's small output size and float32 (bfloat16 matmuls are slow on most CPUs) as defaults; flags
    the user gives still win. Two-stage defaults hold the stage-1 (half) size."""
    halve = 2 if two_stage else 1
    return replace(
        defaults,
        height=DEMO_SIZE["height"] // halve,
        width=DEMO_SIZE["width"] // halve,
        num_frames=DEMO_SIZE["num_frames"],
        dtype="float32",
    )


class GroupValue(Generic[V]):
    """A `Run` attribute that reads the value of one flag group of the command (KeyError: it has no such group)."""

    def __init__(self, group: type[FlagGroup[V]]) -> None:
        self.group = group

    def __get__(self, run: Run, owner: type[Run]) -> V:
        return run[self.group]


@dataclass(frozen=True)
class Run:
    """A checked command line: each group's value and the model files, local and checked."""

    models: RunModels
    values: Mapping[type, Any]
    groups: tuple[FlagGroup[Any], ...]
    parameters: dict[str, Any]
    """What the sidecar records of the command line (every flag, as the run used it)."""
    defaults: PipelineDefaults
    log_level: str = "INFO"
    contributions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """What the groups contribute to the pipeline's constructor, its prompt call and the memory check, merged
    (`merged_contributions`): by `Reading` field (`pipeline_options`, `call_arguments`, `memory_inputs`)."""

    def __getitem__(self, group: type[FlagGroup[V]]) -> V:
        """The value of one of the command's groups (KeyError: the command has no such group)."""
        return self.values[group]

    @property
    def demo(self) -> bool:
        return self.models.demo

    # The common groups' values by name (`run.video` is `run[VideoFlags]`).
    prompt = GroupValue(PromptFlags)
    output = GroupValue(OutputFlags)
    runtime = GroupValue(RuntimeFlags)
    video = GroupValue(VideoFlags)
    guidance = GroupValue(GuidanceFlags)

    @property
    def tiling(self) -> TilingConfig | None:
        choice: TilingChoice | None = self.values.get(TilingFlags)
        return None if choice is None else choice.config

    def on_device(self, device: torch.device) -> Run:
        """This run with its models placed on `device` (one rank's device in a multi-device run)."""
        values = dict(self.values)
        values[RuntimeFlags] = replace(self.runtime, device=device)
        return replace(self, values=values)

    def sidecar_parameters(self) -> dict[str, Any]:
        """The sidecar's `parameters`: every flag as the run used it (and a mark on demo runs)."""
        parameters = dict(self.parameters)
        if self.demo:
            parameters["demo_weights"] = "random (demo)"
        return parameters

    def pipeline_options(self) -> dict[str, Any]:
        """The constructor options every pipeline takes from its command line (see `PipelineOptions`)."""
        options: dict[str, Any] = {
            "loras": self.models.loras,
            "device": self.runtime.device,
            "dtype": self.runtime.dtype,
            "tiling": self.tiling,
            "lora_fusion": self.models.lora_fusion,
            "runtime": self.runtime.options,
            "gemma_8bit": self.runtime.gemma_8bit,
            "text_encoder_mode": self.runtime.text_encoder_mode,
            "file_headers": self.models.headers,
        }
        return {**options, **self.contributions.get("pipeline_options", {})}

    def call_arguments(self) -> dict[str, Any]:
        """The keyword arguments of the pipeline's prompt call (after the prompt): the union of what the groups
        contribute (`Reading.call_arguments`), the video and guidance ones gathered into the pipeline's request
        values (`requests.packed_requests`)."""
        from ltx_pipelines.engine.requests import packed_requests  # here: `--help` stays light

        return packed_requests(self.contributions.get("call_arguments", {}))

    def memory_inputs(self) -> MemoryInputs:
        """What the memory check plans for: the union of what the groups contribute (`Reading.memory_inputs`)."""
        return MemoryInputs(**self.contributions.get("memory_inputs", {}))


Generate = Callable[[P, Run], Any]


CONTRIBUTIONS = ("pipeline_options", "call_arguments", "memory_inputs")


def merged_contributions(
    groups: Sequence[FlagGroup[Any]], readings: Mapping[type, Reading[Any]]
) -> dict[str, dict[str, Any]]:
    """The union of what the groups' readings contribute to each of `CONTRIBUTIONS`; two groups setting one name
    is an error in the command's definition."""
    merged: dict[str, dict[str, Any]] = {part: {} for part in CONTRIBUTIONS}
    owner: dict[tuple[str, str], str] = {}
    for group in groups:
        for part, names in merged.items():
            for name, value in getattr(readings[type(group)], part).items():
                if name in names:
                    raise ValueError(f"{part} {name!r} is set by both {owner[part, name]} and {type(group).__name__}")
                names[name], owner[part, name] = value, type(group).__name__
    return merged


def call_pipeline(pipeline: Any, run: Run, **inputs: Any) -> FinalLatents:
    """The final latents of the pipeline's prompt call: the prompt, the groups' call arguments and `inputs` (what
    a command reads from files at call time: a clip, a mask, a waveform)."""
    return pipeline.generate(run.prompt.text, **run.call_arguments(), **inputs)


def build_distilled(pipeline_class: Callable[..., P] | str, run: Run, **extra: Any) -> P:
    """`pipeline_class` over the run's model files of a distilled two-stage pipeline (checkpoint, spatial
    upsampler, Gemma) with the options every pipeline takes from its command line; `extra` adds the pipeline's own
    or replaces one (a command whose `--lora` names IC-LoRAs passes `loras=()`). A `module:Class` string is
    imported here, once the flags are checked (see `resolve`)."""
    if isinstance(pipeline_class, str):
        pipeline_class = resolve(pipeline_class)
    models = run.models
    return pipeline_class(
        models.checkpoint, models.spatial_upsampler, models.gemma_root, **{**run.pipeline_options(), **extra}
    )


@dataclass(frozen=True)
class PipelineCommand(Generic[P]):
    """A pipeline's command line: the flag `groups` it uses (read in this order; exactly one is the model
    files' `ModelFlags`), `build` (the pipeline from the checked run) and `generate` (the call). `check` runs
    cross-group checks after the model files are resolved (raise `FlagError`). `fixed_defaults`: the defaults
    whatever the checkpoint's model version (else those of the version it declares)."""

    prog: str
    description: str | None
    groups: tuple[FlagGroup[Any], ...]
    build: Callable[[Run], P]
    generate: Generate[P] = call_pipeline
    fixed_defaults: PipelineDefaults | None = None
    check: Callable[[Run], None] | None = None

    @classmethod
    def for_module(
        cls,
        module_name: str,
        doc: str | None,
        *,
        models: ModelFlags,
        groups: tuple[FlagGroup[Any], ...] = (),
        output: OutputFlags | None = None,
        runtime: RuntimeFlags | None = None,
        **fields_: Any,
    ) -> PipelineCommand[Any]:
        """The command of the module `module_name` (`python -m <module>`, described by its docstring's first
        line) with the groups every prompt-driven pipeline has (prompt, output, runtime, `models`) and then
        `groups`."""
        module = sys.modules.get(module_name)
        spec = getattr(module, "__spec__", None)
        # Run with `python -m`, the module is `__main__`; its spec still has the importable name.
        name = spec.name if spec is not None else module_name
        shared = (PromptFlags(), output or OutputFlags(), runtime or RuntimeFlags(), models)
        return cls(
            prog=f"python -m {name}",
            description=doc.splitlines()[0] if doc else None,
            groups=(*shared, *groups),
            **fields_,
        )

    @property
    def models(self) -> ModelFlags:
        (models,) = (group for group in self.groups if isinstance(group, ModelFlags))
        return models

    def parser(self, defaults: PipelineDefaults) -> argparse.ArgumentParser:
        """The full parser; `defaults`: the values its help shows (see `defaults_for`)."""
        parser = CommandParser(prog=self.prog, description=self.description, add_help=False)
        add_groups(parser, self.groups, defaults)
        # Every flag sits in a named group: --help and --log-level too (not argparse's catch-all "options").
        general = parser.add_argument_group("general")
        general.add_argument("-h", "--help", action="help", help="Show this help (with --demo: the demo's defaults).")
        general.add_argument(
            "--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO", help="Logging verbosity (default: INFO)."
        )
        return parser

    def help_defaults(self) -> PipelineDefaults:
        from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS

        return self.fixed_defaults or LTX_2_3_DEFAULTS

    def run_defaults(self, args: argparse.Namespace) -> PipelineDefaults:
        """The defaults of a run with parsed `args`: the model version's (or the fixed ones), made the demo's
        with `--demo`."""
        defaults = self.fixed_defaults or self.models.model_version_defaults(args)
        if args.demo:
            defaults = demo_defaults(defaults, two_stage=self.models.two_stage)
        return defaults

    def defaults_for(self, argv: Sequence[str]) -> PipelineDefaults:
        """The defaults `argv` runs with, read from its model flags alone (`--demo`, `--demo-family`, the
        checkpoint), so that `--help` shows those of the run it would start (`--demo --help`: the demo's)."""
        models = CommandParser(prog=self.prog, add_help=False)
        add_groups(models, (self.models,), self.help_defaults())
        known, _ = models.parse_known_args(list(argv))
        return self.run_defaults(known)

    def parse(self, argv: Sequence[str] | None = None) -> Run:
        """Parse and check `argv`; a bad value ends the program (exit code 2) before any model is built or
        written, the demo models included."""
        parser, args, defaults = self._parse_args(argv)
        try:
            return self.read(args, defaults)
        except FlagError as e:
            parser.error(str(e))

    def _parse_args(
        self, argv: Sequence[str] | None
    ) -> tuple[argparse.ArgumentParser, argparse.Namespace, PipelineDefaults]:
        """`argv` (None: the program's) parsed with the defaults it runs with, logging set from `--log-level`."""
        argv = list(sys.argv[1:] if argv is None else argv)
        defaults = self.defaults_for(argv)
        parser = self.parser(defaults)
        args = parser.parse_args(argv)
        configure_logging(args.log_level)
        return parser, args, defaults

    def read(self, args: argparse.Namespace, defaults: PipelineDefaults | None = None) -> Run:
        """The run of parsed `args` (raises `FlagError`); `defaults`: the run's, when already worked out
        (`defaults_for`; else from `args`)."""
        demo = bool(args.demo)
        defaults = defaults or self.run_defaults(args)
        values: dict[type, Any] = {}
        context = ReadContext(defaults=defaults, demo=demo, values=values)
        readings: dict[type, Reading[Any]] = {}
        # What the user typed is checked before the demo models are built (seconds on a first run).
        for group in self.groups:
            readings[type(group)] = reading = group.read(args, context)
            values[type(group)] = reading.value
        choice: ModelChoice = values[ModelFlags]
        if demo:
            from ltx_pipelines.demo.assets import with_demo_files

            choice = with_demo_files(self.models, choice)
            values[ModelFlags] = choice
        models = resolve_models(self.models, choice, demo=demo)
        # In order: a group settles with the settled values of the groups before it.
        for group in self.groups:
            if readings[type(group)].settle:
                readings[type(group)] = reading = group.settle(values[type(group)], models, context)
                values[type(group)] = reading.value
        parameters: dict[str, Any] = {"demo": demo}
        for reading in readings.values():
            parameters.update(reading.record)
        parameters.update(models.parameters)
        parameters["model_version"] = ".".join(map(str, models.model_version))
        contributions = merged_contributions(self.groups, readings)
        run = Run(models, values, self.groups, parameters, defaults, args.log_level, contributions)
        run = check_fits_in_memory(run)
        if self.check is not None:
            self.check(run)
        return run

    # ---- running -----------------------------------------------------------------------------------

    def run_output(self, run: Run) -> RunOutput:
        """Where and how the run writes its result and what its sidecar records, worked out once from its flags."""
        from ltx_pipelines.engine.generation import RunOutput

        output, models = run.output, run.models
        return RunOutput(
            path=output.path,
            overwrite=output.overwrite,
            parameters=run.sidecar_parameters(),
            model_files=models.files(),
            loras=(*models.loras, *filter(None, [models.distilled_lora])),
            audio=output.audio_output,
            keep_latents=output.save_latents,
        )

    def save_latents(self, run: Run, final: FinalLatents) -> Path | None:
        """Save the final latents before decoding (`save_run_latents`; `produce` does it within `write_run`, a
        server that decodes on its own calls this)."""
        from ltx_pipelines.engine.generation import save_run_latents

        return save_run_latents(final, self.run_output(run))

    def write_decoded(self, run: Run, decoded: Generation | AudioGeneration) -> Path:
        """Write the decoded result and its sidecar as a pair (`write_decoded`; no model is built here)."""
        from ltx_pipelines.engine.generation import write_decoded

        written = write_decoded(decoded, self.run_output(run))
        self.point_to_real_weights(run, written)
        return written

    def point_to_real_weights(self, run: Run, written: Path) -> None:
        """After a demo run's output: say where the released files are (the demo models give noise)."""
        if run.demo:
            from ltx_pipelines.demo.assets import real_weights_help

            help_text = real_weights_help(self.models, run.models.demo_family)
            logger.warning("demo output written to %s. %s", written, help_text)

    def run(self, run: Run) -> int:
        """Build the pipeline and `produce` its outputs; 0, or the exit code of its error after printing its line
        (after denoising, the line names the saved latents and the command that finishes the run)."""
        output: OutputChoice | None = run.values.get(OutputFlags)
        output_path = None if output is None else output.path
        saved: list[Path] = []  # the latents file once written: an error line after it names it
        with stop_signals_interrupt() as stop:
            try:
                with gc_skips_loaded_modules():
                    self.produce(self.build(run), run, saved)
            except SystemExit:
                raise
            except BaseException as error:
                latents = saved[0] if saved else None
                debug = run.log_level == "DEBUG"
                return report_error(error, debug=debug, output_path=output_path, latents=latents, stop=stop)
        return 0

    def produce(self, pipeline: P, run: Run, saved: list[Path]) -> None:
        """Generate the final latents, then `write_run`: save them (their path is appended to `saved`), decode
        them, write the output and its sidecar, and remove the latents unless --save-latents."""
        from ltx_pipelines.engine.generation import write_run

        final: FinalLatents = self.generate(pipeline, run)
        if "num_frames" in run.parameters and run.parameters["num_frames"] is None:
            # The length the duration head picked: the sidecar records it.
            run = replace(run, parameters={**run.parameters, "num_frames": final.shape.frames})
        written = write_run(final, pipeline.decode, self.run_output(run), saved.append)  # type: ignore[attr-defined]
        self.point_to_real_weights(run, written)

    def main(self, argv: Sequence[str] | None = None) -> int:
        """`python -m <module>`: bad arguments exit with code 2, a later failure with 1 (one line on stderr)."""
        parser, args, defaults = self._parse_args(argv)
        try:
            run = self.read(args, defaults)
        except FlagError as e:
            parser.error(str(e))
        except BaseException as error:  # e.g. building the demo models failed
            return report_error(error, debug=args.log_level == "DEBUG")
        return self.run(run)


def memory_inputs(run: Run) -> tuple[GenerationSizes, GenerationWorkload] | None:
    """What the memory estimate takes of a run: its models' sizes (from the files' headers and configs) and its
    workload; None where the run has no transformer config or video settings to estimate from."""
    from ltx_core.generation_memory import GenerationWorkload, sizes_of_files, video_workload
    from ltx_core.loader import CheckpointError, Component, ModelFiles

    inputs = run.memory_inputs()
    runtime = run.runtime
    config = run.models.metadata.get("config")
    if not run.models.transformer_config or inputs.num_frames is None or inputs.frame_rate is None or not config:
        return None
    gemma = run.models.gemma_root
    checkpoint = run.models.checkpoint
    if gemma is None and isinstance(checkpoint, ModelFiles) and checkpoint.has(Component.TEXT_ENCODER):
        gemma = checkpoint.source(Component.TEXT_ENCODER).path
    try:
        sizes = sizes_of_files(
            config, gemma, run.models.spatial_upsampler, gemma_8bit=runtime.gemma_8bit, headers=run.models.headers
        )
    except CheckpointError as e:  # e.g. a Gemma file cut short: found here, before any model loads
        raise FlagError(str(e)) from None
    shape = video_workload(
        inputs.height, inputs.width, inputs.num_frames, inputs.frame_rate, tiling=inputs.tiling, batch=inputs.batch
    )
    two_stage = run.models.spatial_upsampler is not None
    work = GenerationWorkload(
        shape=shape,
        two_stage=two_stage,
        prompts=inputs.prompts,
        enhance=inputs.enhance,
        loads_video_encoder=two_stage or inputs.images,
    )
    return sizes, work


def _transformer_is_gguf(run: Run) -> bool:
    from ltx_core.loader import Component, ModelFiles
    from ltx_core.loader.gguf_file import is_gguf

    checkpoint = run.models.checkpoint
    if isinstance(checkpoint, ModelFiles):
        if not checkpoint.has(Component.TRANSFORMER):
            return False
        checkpoint = checkpoint.source(Component.TRANSFORMER).path
    return is_gguf(checkpoint)


def check_fits_in_memory(run: Run) -> Run:
    """Stop before loading anything when the run's estimated peak memory, phase by phase, exceeds what is free
    on its device (on the CPU and MPS: the host's available RAM), naming the phases and what would fit. With
    `--offload auto`, pick the transformer's and the text encoder's modes here (logged, one line each) and
    return the run with them (`ltx_core.offload_auto`)."""
    import torch

    from ltx_core.devices import available_memory
    from ltx_core.generation_memory import TRANSFORMER_MODE_OPTIONS
    from ltx_core.memory_estimate import InsufficientMemoryError
    from ltx_core.offload_auto import check_generation_fits, choose_offload
    from ltx_core.runtime import RuntimeOptions
    from ltx_core.text_encoders.gemma.modes import text_encoder_mode_for

    runtime = run.runtime
    _refuse_step_cache_with_streaming(run)
    free = available_memory(runtime.device)
    inputs = None if free is None else memory_inputs(run)
    if free is None or inputs is None:
        return run
    sizes, work = inputs
    host = runtime.device.type != "cuda"
    free_host = None if host else available_memory(torch.device("cpu"))
    memory = {"free_bytes": free, "free_host_bytes": free_host, "in_host_ram": host, "dtype": runtime.dtype}
    options = runtime.options or RuntimeOptions()
    try:
        if not runtime.offload_auto:
            text_mode = text_encoder_mode_for(runtime.text_encoder_mode, options.offload)
            check_generation_fits(sizes, work, transformer_options=options, text_encoder_mode=text_mode, **memory)
            return run
        choice = choose_offload(sizes, work, **_auto_modes(run), **memory)
    except InsufficientMemoryError as e:
        raise FlagError(str(e)) from None
    for line in choice.log_lines():
        logger.info("%s", line)
    if not choice.fits:
        raise FlagError(choice.failure(free, in_host_ram=host))
    picked = TRANSFORMER_MODE_OPTIONS[choice.transformer.mode or "full"]
    options = replace(options, offload=picked.offload, quantization=options.quantization or picked.quantization)
    try:
        options.validate(runtime.device)  # e.g. --compile's settings with streaming
    except (ValueError, RuntimeError) as e:
        raise FlagError(f"--offload auto picked {choice.transformer.mode} for the transformer: {e}") from None
    values = dict(run.values)
    values[RuntimeFlags] = replace(
        runtime, options=None if options == RuntimeOptions() else options, text_encoder_mode=choice.text_encoder.mode
    )
    picks = {"offload_auto": f"transformer {choice.transformer.mode}, text encoder {choice.text_encoder.mode}"}
    return replace(run, values=values, parameters={**run.parameters, **picks})


def _refuse_step_cache_with_streaming(run: Run) -> None:
    """The step cache skips the deep blocks on a cached step; streaming walks every block in order (issue 38)."""
    step_cache, options = run.values.get(StepCacheFlags), run.runtime.options
    if step_cache is not None and options is not None and options.streams_blocks:
        raise FlagError(
            f"--step-cache {step_cache} skips transformer blocks, which --offload {options.offload} streams "
            "in order; leave out one of them"
        )


def _auto_modes(run: Run) -> dict[str, tuple[str, ...]]:
    """The modes `--offload auto` may pick among for this run (none given: all)."""
    from ltx_core.generation_memory import TRANSFORMER_MODES

    runtime = run.runtime
    # An 8-bit Gemma is loaded as it is and not streamed (the pipelines refuse offloading beside it): the
    # transformer is picked among the modes that do not stream either. A --text-encoder-mode given is kept.
    modes: dict[str, tuple[str, ...]] = {}
    if runtime.gemma_8bit:
        modes = {"transformer_modes": ("full", "fp8"), "text_encoder_modes": ("full",)}
    elif runtime.text_encoder_mode is not None:
        modes = {"text_encoder_modes": (runtime.text_encoder_mode,)}
    transformer = modes.get("transformer_modes", TRANSFORMER_MODES)
    if run.values.get(StepCacheFlags) is not None:  # a streamed transformer cannot skip blocks
        transformer = tuple(m for m in transformer if not m.startswith("stream"))
    if _transformer_is_gguf(run):  # already quantized: fp8-cast would refuse it
        transformer = tuple(m for m in transformer if m != "fp8")
    if transformer != TRANSFORMER_MODES:
        modes["transformer_modes"] = transformer
    return modes


def run_reporting_errors(body: Callable[[], object], *, debug: bool, output_path: Path | None = None) -> int:
    """Run `body`; 0 when it returns, else the exit code of its error after printing the error's one line
    (SIGTERM included: it ends the run like Ctrl-C, `stop_signals_interrupt`)."""
    with stop_signals_interrupt() as stop:
        try:
            body()
        except SystemExit:
            raise
        except BaseException as error:
            return report_error(error, debug=debug, output_path=output_path, stop=stop)
    return 0


@contextmanager
def gc_skips_loaded_modules() -> Iterator[None]:
    """Within the block, full garbage collections skip every object that exists when it starts.

    Pipelines free each model with a full collection; after torch and transformers are imported that walks
    millions of long-lived objects each time (0.3 s per model on a 2-core test machine, seconds per demo
    run). Moving them to the permanent generation first makes those collections cheap; they are handed back
    on exit.
    """
    import gc

    # The prompt encoder imports transformers' Gemma on first use; import it now so it is frozen too.
    from transformers import Gemma3ForConditionalGeneration  # noqa: F401

    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def configure_logging(level: str) -> None:
    """Root logging at `level` (from `--log-level`), with timestamps; libraries only use loggers."""
    logging.basicConfig(level=getattr(logging, level.upper()), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


EXIT_FAILED = 1


EXIT_INTERRUPTED = 130  # the shell's code for a run ended by Ctrl-C (128 + SIGINT)


# 128 + SIGTERM: what a shell reports for a job SIGTERM ended, so Slurm, docker, `timeout` and systemd
# see the stop they asked for (and the trainer's code for it; Ctrl-C keeps 130).
EXIT_TERMINATED = 143


_MAX_DETAIL = 1000


_NO_PERMISSION = {errno.EACCES, errno.EPERM, errno.EROFS}


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived. A KeyboardInterrupt, so everything that cleans up after Ctrl-C (temporary files,
    the latents kept) does the same for it."""


@dataclass
class StopSignal:
    """Whether SIGTERM arrived in a `stop_signals_interrupt` block. A signal landing inside C code (a
    safetensors read, a torch kernel) may come out as that code's own error, not as `Terminated`: the
    error line then still says the run was terminated, not that a model file or an input is bad."""

    received: bool = False


@contextmanager
def stop_signals_interrupt() -> Iterator[StopSignal]:
    """Within the block SIGTERM raises `Terminated` (like Ctrl-C's KeyboardInterrupt) and is recorded in the
    yielded `StopSignal`; the previous handler is restored after. Signal handlers belong to the main thread:
    elsewhere nothing changes."""
    state = StopSignal()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        state.received = True
        raise Terminated(f"stopped by signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class ErrorLine:
    text: str
    exit_code: int = EXIT_FAILED


def _detail(error: BaseException) -> str:
    """The error's message on one line, shortened (torch's memory reports run to many lines)."""
    text = " ".join(str(error).split())
    if not text:
        text = type(error).__name__
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, MemoryError):
        return True
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(error, oom):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def describe_error(error: BaseException, *, output_path: Path | None = None, terminated: bool = False) -> ErrorLine:
    """The line (without the `error:` prefix) and the exit code for `error`; `terminated`: SIGTERM arrived
    before it (`StopSignal.received`), so an ordinary error is the signal's doing."""
    from ltx_core.conditioning import ConditioningError
    from ltx_core.loader import CheckpointError
    from ltx_pipelines.cli.model_resolution import HfPathError
    from ltx_pipelines.engine.generation import LatentsFileError, NonFiniteLatentsError  # cb-write: moved here

    if isinstance(error, Terminated) or (terminated and isinstance(error, Exception)):
        return ErrorLine("terminated (SIGTERM)", EXIT_TERMINATED)
    if isinstance(error, KeyboardInterrupt):
        return ErrorLine("interrupted", EXIT_INTERRUPTED)
    if _is_out_of_memory(error):
        return ErrorLine(
            f"out of memory ({_detail(error)}); try a smaller --height/--width/--num-frames, --dtype bfloat16, "
            "or close other programs using the GPU"
        )
    if is_disk_full(error):
        where = getattr(error, "filename", None) or (output_path.parent if output_path is not None else None)
        place = f" writing {str(where)!r}" if where else ""
        return ErrorLine(
            f"no space left on the disk{place}; free some space or choose an --output-path on another disk"
        )
    if isinstance(error, OSError) and error.errno in _NO_PERMISSION and error.filename:
        return ErrorLine(f"permission denied for {str(error.filename)!r} ({_detail(error)}); check its permissions")
    if isinstance(error, CheckpointError):
        return ErrorLine(f"{_detail(error)} (check that each model file is the one its flag expects)")
    if isinstance(
        error,
        (MediaError, HfPathError, ConditioningError, OutputExistsError, LatentsFileError, NonFiniteLatentsError),
    ):
        return ErrorLine(_detail(error))
    return ErrorLine(
        f"{type(error).__name__}: {_detail(error)} (run again with --log-level DEBUG to see where it happened)"
    )


def report_error(
    error: BaseException,
    *,
    debug: bool,
    output_path: Path | None = None,
    latents: Path | None = None,
    stream: TextIO | None = None,
    stop: StopSignal | None = None,
) -> int:
    """Print the one line for `error` (after the traceback when `debug`) and return the exit code.
    `latents`: where the run saved its denoised latents (the line then says how to finish the run);
    `stop`: the block's `StopSignal` (a SIGTERM before the error makes it a termination)."""
    stream = stream or sys.stderr
    if debug:
        traceback.print_exception(type(error), error, error.__traceback__, file=stream)
    line = describe_error(error, output_path=output_path, terminated=stop is not None and stop.received)
    text = line.text
    if latents is not None:
        target = output_path if output_path is not None else latents.with_name("output.mp4")
        text += (
            f"; the denoised latents are saved in {str(latents)!r}: finish with "
            f"python -m ltx_pipelines.decode --latents {shlex.quote(str(latents))} "
            f"--output-path {shlex.quote(str(target))}"
        )
    print(f"error: {text}", file=stream, flush=True)
    return line.exit_code


def forward_to(module: str) -> Callable[[str], Any]:
    """A module `__getattr__` that finds every name the module lacks in `module` (imported on first use), so
    `from ltx_pipelines.distilled import DistilledPipeline` keeps working from the light command module."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(module), name)

    return __getattr__


def resolve(target: str) -> Any:
    """The object `module:name` names (its module imported now): a command builds its pipeline class through
    this only once its flags are checked."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
