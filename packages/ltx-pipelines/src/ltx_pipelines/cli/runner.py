"""The command-line flow every pipeline shares: parse, validate (before any model loads), substitute
the demo models when asked, generate, and write the outputs. A failure after validation ends in one
line on stderr with exit code 1 (`error_lines`); one after denoising keeps the latents to resume from."""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import torch

from ltx_core.loader import LoraSpec
from ltx_pipelines.cli.args import (
    add_common_args,
    add_guidance_args,
    add_lora_args,
    add_model_args,
    add_sampling_args,
    add_two_stage_args,
    add_video_args,
    configure_logging,
    defaults_from_argv,
    make_parser,
)
from ltx_pipelines.cli.error_lines import report_error
from ltx_pipelines.cli.run_config import RunConfig, ValidationRules, validate_args
from ltx_pipelines.cli.runtime_flags import add_runtime_args
from ltx_pipelines.cli.tiling_flags import add_tiling_args
from ltx_pipelines.engine.defaults import DEFAULT_NEGATIVE_PROMPT, PipelineDefaults
from ltx_pipelines.engine.final_latents import final_latents_of, note_saved_latents, saved_latents_of
from ltx_pipelines.engine.generation import Generation, describe_model_files
from ltx_pipelines.engine.latents_file import RunRecord, save_latents_beside
from ltx_pipelines.engine.prompt_pipeline import PromptPipeline
from ltx_pipelines.engine.stages import ImageCondition

logger = logging.getLogger(__name__)

G = TypeVar("G", bound=PromptPipeline)

# The demo's random tiny models give noise at any size: keep it small so it runs in seconds on a CPU.
DEMO_SIZE = {"height": 128, "width": 192, "num_frames": 17}


def demo_requested(argv: Sequence[str]) -> bool:
    """Whether the command line asks for `--demo` (read before the real parser is built, since the
    demo changes that parser's defaults)."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--demo", action="store_true")
    known, _ = probe.parse_known_args(argv)
    return bool(known.demo)


def demo_defaults(defaults: PipelineDefaults, *, two_stage: bool) -> PipelineDefaults:
    """The demo's small output size and float32 (bfloat16 matmuls are slow on most CPUs) as defaults;
    flags the user gives still win. Two-stage defaults hold the stage-1 (half) size."""
    halve = 2 if two_stage else 1
    return replace(
        defaults,
        height=DEMO_SIZE["height"] // halve,
        width=DEMO_SIZE["width"] // halve,
        num_frames=DEMO_SIZE["num_frames"],
        dtype="float32",
    )

@dataclass(frozen=True)
class CliLayout:
    """Which shared flag groups a pipeline's command line has (and so which model files it takes)."""

    distilled: bool
    """The checkpoint flag is `--distilled-checkpoint-path` (else `--checkpoint-path`)."""
    two_stage: bool
    """`--spatial-upsampler-path`, and output sizes in multiples of 64."""
    guidance: bool
    distilled_lora: bool
    sampling_steps: bool

    def real_weights_help(self) -> str:
        """What to download (the released file names) and pass instead of the demo's random weights."""
        if self.distilled:
            files = ["ltx-2.3-22b-distilled-1.1.safetensors"]
            flags = ["--distilled-checkpoint-path"]
        else:
            files = ["ltx-2.3-22b-dev.safetensors"]
            flags = ["--checkpoint-path"]
        if self.two_stage:
            files.append("ltx-2.3-spatial-upscaler-x2-1.1.safetensors")
            flags.append("--spatial-upsampler-path")
        if self.distilled_lora:
            files.append("ltx-2.3-22b-distilled-lora-384-1.1.safetensors")
            flags.append("--distilled-lora")
        flags.append("--gemma-root")
        names = " \\\n      ".join(files)
        return (
            "Demo weights are random: the output is noise. For real videos, download the released files, e.g.\n"
            f"  hf download Lightricks/LTX-2.3 {names} --local-dir models/ltx-2.3\n"
            "  hf download google/gemma-3-12b-it-qat-q4_0-unquantized --local-dir models/gemma-3-12b\n"
            f"and pass them with {', '.join(flags[:-1])} and {flags[-1]}\n"
            "(hf://<org>/<repo>/<file> paths work too)."
        )


DISTILLED_LAYOUT = CliLayout(distilled=True, two_stage=True, guidance=False, distilled_lora=False, sampling_steps=False)
ONE_STAGE_LAYOUT = CliLayout(distilled=False, two_stage=False, guidance=True, distilled_lora=False, sampling_steps=True)
TWO_STAGE_LAYOUT = CliLayout(distilled=False, two_stage=True, guidance=True, distilled_lora=True, sampling_steps=True)


@dataclass(frozen=True)
class ParsedRun:
    """A validated command line with everything resolved to local files."""

    config: RunConfig
    defaults: PipelineDefaults
    parameters: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    """What `PipelineCli.check_extra` made of the pipeline's own flags."""

    @property
    def checkpoint_path(self) -> Path:
        assert self.config.checkpoint_path is not None
        return self.config.checkpoint_path

    @property
    def spatial_upsampler_path(self) -> Path:
        assert self.config.spatial_upsampler_path is not None
        return self.config.spatial_upsampler_path

    @property
    def gemma_root(self) -> Path | None:
        return self.config.gemma_root

    @property
    def lora_specs(self) -> tuple[LoraSpec, ...]:
        return self.config.loras

    @property
    def distilled_lora_spec(self) -> LoraSpec | None:
        return self.config.distilled_lora

    def pipeline_options(self) -> dict[str, Any]:
        """The constructor options every pipeline takes from its command line (see `PipelineOptions`)."""
        config = self.config
        return {
            "loras": self.lora_specs,
            "device": config.device,
            "dtype": config.dtype,
            "tiling": config.tiling,
            "lora_fusion": config.lora_fusion,
            "runtime": config.runtime,
            "gemma_8bit": config.gemma_8bit,
        }

    @property
    def image_conditions(self) -> tuple[ImageCondition, ...]:
        return self.config.images


class PipelineCli:
    """Builds a pipeline's parser from the shared flag groups and runs the shared checks."""

    output_suffixes: tuple[str, ...] = (".mp4",)
    """What `--output-path` may end in (audio-only pipelines write `.wav`)."""

    def __init__(
        self,
        *,
        prog: str,
        description: str | None,
        layout: CliLayout,
        extra_args: Callable[[argparse.ArgumentParser, PipelineDefaults], None] | None = None,
        fixed_defaults: PipelineDefaults | None = None,
    ) -> None:
        """`fixed_defaults`: the defaults the flags show and use whatever the checkpoint's generation
        (else those of the generation the checkpoint flag names)."""
        self.prog = prog
        self.description = description
        self.layout = layout
        self.extra_args = extra_args
        self.fixed_defaults = fixed_defaults

    def build_parser(self, defaults: PipelineDefaults) -> argparse.ArgumentParser:
        layout = self.layout
        parser = make_parser(self.prog, self.description)
        add_common_args(parser, defaults)
        add_model_args(parser, distilled=layout.distilled)
        if layout.two_stage:
            add_two_stage_args(parser, distilled_lora=layout.distilled_lora)
        add_lora_args(parser)
        add_video_args(parser, defaults, two_stage=layout.two_stage)
        add_tiling_args(parser)
        add_runtime_args(parser)
        if layout.sampling_steps:
            add_sampling_args(parser, defaults)
        if layout.guidance:
            add_guidance_args(parser, defaults)
        if self.extra_args is not None:
            self.extra_args(parser, defaults)
        return parser

    def parse(self, argv: Sequence[str] | None = None) -> ParsedRun:
        """Parse and check `argv`; a bad value ends the program (exit code 2) before any model is
        built or written, the demo models included."""
        argv = list(sys.argv[1:] if argv is None else argv)
        demo = demo_requested(argv)
        defaults = self.fixed_defaults or defaults_from_argv(argv, distilled=self.layout.distilled)
        if demo:
            defaults = demo_defaults(defaults, two_stage=self.layout.two_stage)
        parser = self.build_parser(defaults)
        args = parser.parse_args(argv)
        configure_logging(args.log_level)
        rules = ValidationRules(writes_sidecar=True, output_suffixes=self.output_suffixes)
        # What the user typed is checked before the demo models are built (seconds on a first run);
        # the second pass checks the substituted demo files.
        config = validate_args(parser, args, rules)
        extra = self.check_extra(parser, args, config)
        if demo:
            args = self._with_demo_models(args)
            config = validate_args(parser, args, rules)
        return ParsedRun(
            config=config, defaults=defaults, parameters=_recorded_parameters(args, config), extra=extra
        )

    @staticmethod
    def redescribe(parser: argparse.ArgumentParser, dest: str, help_text: str) -> None:
        """Replace the help of a shared flag whose meaning a pipeline narrows (e.g. `--lora` = IC-LoRAs)."""
        for action in parser._actions:
            if action.dest == dest:
                action.help = help_text
                return
        raise KeyError(f"the parser has no flag with destination {dest!r}")

    def check_extra(
        self, parser: argparse.ArgumentParser, args: argparse.Namespace, config: RunConfig
    ) -> dict[str, Any]:
        """Check the pipeline's own flags (those `extra_args` adds) before anything is built; a bad value
        ends the program through `parser.error`. Returns the checked values (`ParsedRun.extra`)."""
        return {}

    def _with_demo_models(self, args: argparse.Namespace) -> argparse.Namespace:
        """A copy of `args` with the demo model files wherever the user gave none."""
        from ltx_pipelines.demo_assets import ensure_demo_assets

        logger.warning(self.layout.real_weights_help())
        assets = ensure_demo_assets()
        checkpoint_dest = "distilled_checkpoint_path" if self.layout.distilled else "checkpoint_path"
        substitutes = {checkpoint_dest: assets.checkpoint, "gemma_root": assets.gemma_root}
        if self.layout.two_stage:
            substitutes["spatial_upsampler_path"] = assets.spatial_upsampler
        # Pipelines with a distilled LoRA run the demo's stage 2 without one (validation allows it).
        given = vars(args)
        return argparse.Namespace(
            **{**given, **{dest: str(path) for dest, path in substitutes.items() if given.get(dest) is None}}
        )

    def generation_options(self, run: ParsedRun) -> dict[str, Any]:
        """The keyword arguments of the pipeline call (after the prompt) that this command line sets."""
        config = run.config
        options: dict[str, Any] = {
            "seed": config.seed,
            "height": config.height,
            "width": config.width,
            "num_frames": config.num_frames,
            "frame_rate": config.frame_rate,
            "images": run.image_conditions,
            "enhance_prompt": config.enhance_prompt,
        }
        if self.layout.guidance:
            negative = config.negative_prompt
            options.update(
                negative_prompt=negative if negative is not None else DEFAULT_NEGATIVE_PROMPT,
                num_inference_steps=config.num_inference_steps,
                video_guidance=config.video_guidance,
                audio_guidance=config.audio_guidance,
            )
        return options

    def build_guided(self, pipeline_class: type[G], run: ParsedRun, **extra: Any) -> G:
        """`pipeline_class` over the run's model files (those of this layout) with the options every
        guided pipeline takes from its command line; `extra` adds pipeline-specific ones."""
        files: list[Path] = [run.checkpoint_path]
        if self.layout.two_stage:
            files.append(run.spatial_upsampler_path)
        if self.layout.distilled_lora and "distilled_lora" not in extra:
            extra["distilled_lora"] = run.distilled_lora_spec
        return pipeline_class(
            *files,
            run.gemma_root,
            max_batch_size=run.config.max_batch_size,
            **run.pipeline_options(),
            **extra,
        )

    def model_files(self, run: ParsedRun) -> dict[str, Path]:
        """The model files this run used, by role (a pipeline without an upsampler lists none)."""
        given = {
            "checkpoint": run.config.checkpoint_path,
            "spatial_upsampler": run.config.spatial_upsampler_path,
            "gemma_root": run.config.gemma_root,
        }
        files = {role: path for role, path in given.items() if path is not None}
        for i, lora in enumerate(run.config.loras):
            files[f"lora_{i}"] = Path(lora.path)
        if run.config.distilled_lora is not None:
            files["distilled_lora"] = Path(run.config.distilled_lora.path)
        return files

    def sidecar_parameters(self, run: ParsedRun) -> dict[str, Any]:
        parameters = dict(run.parameters)
        if run.config.demo:
            parameters["demo_weights"] = "random (demo)"
        return parameters

    def write(self, run: ParsedRun, generation: Generation) -> Path:
        """Save the video and sidecar through `Generation.save` (the Python API's path too)."""
        saved = generation.save(
            run.config.output_path,
            overwrite=run.config.overwrite,
            parameters=self.sidecar_parameters(run),
            model_files=self.model_files(run),
            keep_latents=run.config.save_latents,
            audio=run.config.audio_output,
        )
        if run.config.demo:
            logger.warning("demo output written to %s. %s", saved.video, self.layout.real_weights_help())
        return saved.video

    def keep_failed_latents(self, run: ParsedRun, error: BaseException) -> None:
        """A failure after denoising that came before a Generation existed (decoding the audio): save the
        latents it carries beside the output, so the run's result is not lost."""
        final = final_latents_of(error)
        if final is None or saved_latents_of(error) is not None:
            return
        generation_record = RunRecord(
            prompt=run.config.prompt,
            parameters=self.sidecar_parameters(run),
            model_files=describe_model_files(self.model_files(run)),
        )
        try:
            path = save_latents_beside(run.config.output_path, final, generation_record, overwrite=run.config.overwrite)
        except Exception as save_error:
            logger.error("could not save the denoised latents either: %s", save_error)
            return
        note_saved_latents(error, path)

    def run(self, argv: Sequence[str] | None, generate: Callable[[ParsedRun], Generation]) -> int:
        """A pipeline's `main()`: parse and validate (bad arguments exit with code 2), generate, write the
        video + sidecar. A later failure ends in one line on stderr and exit code 1 (`error_lines`), with
        the denoised latents kept when it came after denoising."""
        try:
            run = self.parse(argv)
        except SystemExit:
            raise
        except BaseException as error:  # e.g. building the demo models failed (validation itself exits 2)
            return report_error(error, debug=_debug_requested(argv))
        output = run.config.output_path

        def body() -> None:
            try:
                with gc_skips_loaded_modules():
                    self.write(run, generate(run))  # the video is decoded while it is written
            except BaseException as error:
                self.keep_failed_latents(run, error)
                raise

        return run_reporting_errors(body, debug=run.config.log_level == "DEBUG", output_path=output)


def _debug_requested(argv: Sequence[str] | None) -> bool:
    """Whether the command line asks for `--log-level DEBUG` (read when parsing itself failed)."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--log-level", type=str.upper, default="INFO")
    known, _ = probe.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    return known.log_level == "DEBUG"


def run_reporting_errors(body: Callable[[], object], *, debug: bool, output_path: Path | None = None) -> int:
    """Run `body`; 0 when it returns, else the exit code of its error after printing the error's one line."""
    try:
        body()
    except SystemExit:
        raise
    except BaseException as error:
        return report_error(error, debug=debug, output_path=output_path)
    return 0


def _recorded_parameters(args: argparse.Namespace, config: RunConfig) -> dict[str, Any]:
    """The run's parameters for the sidecar: every flag as given, with the values the run actually used
    where validation resolved them (device, dtype, image CRFs, local LoRA files, the model version)."""
    parameters = {k: v for k, v in vars(args).items() if k != "log_level"}
    parameters.update(
        seed=config.seed,
        device=str(config.device),
        dtype=dtype_name(config.dtype),
        model_version=".".join(map(str, config.model_version)),
    )
    # The values validation settled on (e.g. the demo's STG blocks fitted to its few transformer blocks).
    for modality, guidance in (("video", config.video_guidance), ("audio", config.audio_guidance)):
        if guidance is not None:
            parameters[f"{modality}_stg_blocks"] = list(guidance.stg_blocks)
    if "images" in parameters:
        parameters["images"] = [
            {"path": str(i.path), "frame_idx": i.frame_idx, "strength": i.strength, "crf": i.crf} for i in config.images
        ]
    if "lora" in parameters:
        parameters["lora"] = [{"path": str(lora.path), "strength": lora.strength} for lora in config.loras]
    if config.distilled_lora is not None:
        lora = config.distilled_lora
        parameters["distilled_lora"] = {"path": str(lora.path), "strength": lora.strength}
    if "lora_fusion_precision" in parameters:
        parameters["lora_fusion_precision"] = config.lora_fusion.value
    return parameters


@contextmanager
def gc_skips_loaded_modules() -> Iterator[None]:
    """Within the block, full garbage collections skip every object that exists when it starts.

    Pipelines free each model with a full collection; after torch and transformers are imported that
    walks millions of long-lived objects each time (0.3 s per model on a 2-core test machine, seconds per
    demo run). Moving them to the permanent generation first makes those collections cheap; they are
    handed back on exit.
    """
    # The prompt encoder imports transformers' Gemma on first use; import it now so it is frozen too.
    from transformers import Gemma3ForConditionalGeneration  # noqa: F401

    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def run_pipeline_cli(cli: PipelineCli, argv: Sequence[str] | None, build: Callable[[ParsedRun], Any]) -> int:
    """The `main()` of every pipeline: parse and validate, build the pipeline (`build`), generate from
    the prompt with the flags' settings, write video + sidecar (`PipelineCli.run`: one error line and
    exit code 1 on a later failure, with the denoised latents kept)."""

    def generate(run: ParsedRun) -> Generation:
        return build(run)(run.config.prompt, **cli.generation_options(run))

    return cli.run(argv, generate)


def run_guided_cli(
    cli: PipelineCli,
    argv: Sequence[str] | None,
    pipeline_class: type[PromptPipeline],
    extra_options: Callable[[ParsedRun], dict[str, Any]] | None = None,
) -> int:
    """The `main()` of a guided pipeline: `pipeline_class` built by `PipelineCli.build_guided`, with
    `extra_options(run)` added to its constructor arguments."""
    return run_pipeline_cli(
        cli, argv, lambda run: cli.build_guided(pipeline_class, run, **(extra_options(run) if extra_options else {}))
    )


@dataclass(frozen=True)
class GuidedMain:
    """A guided pipeline module's `main(argv=None) -> exit code`: its command line and what it builds."""

    cli: PipelineCli
    pipeline_class: type[PromptPipeline]
    extra_options: Callable[[ParsedRun], dict[str, Any]] | None = None

    def __call__(self, argv: Sequence[str] | None = None) -> int:
        return run_guided_cli(self.cli, argv, self.pipeline_class, self.extra_options)


def guided_main(
    pipeline_class: type[PromptPipeline],
    layout: CliLayout,
    *,
    extra_args: Callable[[argparse.ArgumentParser, PipelineDefaults], None] | None = None,
    fixed_defaults: PipelineDefaults | None = None,
    extra_options: Callable[[ParsedRun], dict[str, Any]] | None = None,
) -> GuidedMain:
    """The `main` of the module defining `pipeline_class` (`python -m <module>`), described by the
    first line of that module's docstring."""
    module = sys.modules[pipeline_class.__module__]
    # Run with `python -m`, the module is `__main__`; its spec still has the importable name.
    name = module.__spec__.name if module.__spec__ is not None else module.__name__
    doc = module.__doc__
    cli = PipelineCli(
        prog=f"python -m {name}",
        description=doc.splitlines()[0] if doc else None,
        layout=layout,
        extra_args=extra_args,
        fixed_defaults=fixed_defaults,
    )
    return GuidedMain(cli, pipeline_class, extra_options)
