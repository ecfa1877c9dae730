"""The command lines of the guided (full-checkpoint) pipelines: the shared groups plus guidance, and the
pipeline built over the run's model files with the options every guided pipeline takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ltx_pipelines.cli.command import Generate, PipelineCommand, Run, call_pipeline, resolve
from ltx_pipelines.cli.flag_group import FlagGroup
from ltx_pipelines.cli.guidance_flags import GuidanceFlags, MaxBatchSizeFlags
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.request_flags import VideoFlags
from ltx_pipelines.cli.runtime_flags import TilingFlags
from ltx_pipelines.cli.step_cache_flags import StepCacheFlags
from ltx_pipelines.engine.model_versions import PipelineDefaults

if TYPE_CHECKING:
    pass

P = TypeVar("P")


def build_guided(pipeline_class: Callable[..., P] | str, run: Run, **extra: Any) -> P:
    """`pipeline_class` over the run's model files (checkpoint, the upsampler of two-stage runs, Gemma) with
    the options every guided pipeline takes from its command line; `extra` adds the pipeline's own. A
    `module:Class` string is imported here, once the flags are checked (see `cli.command.resolve`)."""
    if isinstance(pipeline_class, str):
        pipeline_class = resolve(pipeline_class)
    models = run.models
    files = [models.checkpoint]
    if models.spatial_upsampler is not None:  # two-stage: stage 2 fuses the distilled LoRA
        files.append(models.spatial_upsampler)
        extra.setdefault("distilled_lora", models.distilled_lora)
    return pipeline_class(
        *files, models.gemma_root, max_batch_size=run[MaxBatchSizeFlags], **run.pipeline_options(), **extra
    )


def guided_command(
    module_name: str,
    doc: str | None,
    build: Callable[[Run], P],
    *,
    two_stage: bool,
    groups: tuple[FlagGroup[Any], ...] = (),
    guidance: GuidanceFlags | None = None,
    fixed_defaults: PipelineDefaults | None = None,
    generate: Generate[P] = call_pipeline,
) -> PipelineCommand[P]:
    """The command of a guided text/image-to-video pipeline: full checkpoint (two-stage: with the spatial
    upsampler and the distilled LoRA of stage 2), video, tiling and guidance flags, then `groups`."""
    return PipelineCommand.for_module(
        module_name,
        doc,
        models=ModelFlags(distilled=False, two_stage=two_stage, distilled_lora=two_stage),
        groups=(
            VideoFlags(two_stage=two_stage),
            TilingFlags(),
            guidance or GuidanceFlags(),
            MaxBatchSizeFlags(),
            StepCacheFlags(),
            *groups,
        ),
        build=build,
        generate=generate,
        fixed_defaults=fixed_defaults,
    )
