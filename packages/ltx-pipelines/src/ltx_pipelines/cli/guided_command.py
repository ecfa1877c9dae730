"""The command lines of the guided (full-checkpoint) pipelines: the shared groups plus guidance, and the
pipeline built over the run's model files with the options every guided pipeline takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ltx_pipelines.cli.command import Generate, PipelineCommand, Run
from ltx_pipelines.cli.flag_group import FlagGroup
from ltx_pipelines.cli.guidance_flags import GuidanceFlags, MaxBatchSizeFlags
from ltx_pipelines.cli.lazy import resolve
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.step_cache_flags import StepCacheFlags
from ltx_pipelines.cli.tiling_flags import TilingFlags
from ltx_pipelines.cli.video_flags import VideoFlags
from ltx_pipelines.engine.defaults import PipelineDefaults

if TYPE_CHECKING:
    from ltx_pipelines.engine.final_latents import FinalLatents

P = TypeVar("P")


# ---- issue 34: the guided pipelines take request values (one marked place; the CLI helper generalizes it) ----
_VIDEO_ARGUMENTS = ("height", "width", "num_frames", "frame_rate", "images", "generated_keyframes", "duration")
_GUIDANCE_ARGUMENTS = {
    "negative_prompt": "negative_prompt",
    "num_inference_steps": "num_inference_steps",
    "video_guidance": "video",
    "audio_guidance": "audio",
}


def requests_of(arguments: dict[str, Any]) -> dict[str, Any]:
    """The groups' call arguments (`Run.call_arguments`) with the video and guidance ones as the request values
    the guided pipelines take (`video=VideoRequest(...)`, `guidance=GuidanceRequest(...)`)."""
    from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest

    rest = dict(arguments)
    video = {name: rest.pop(name) for name in _VIDEO_ARGUMENTS if name in rest}
    guidance = {field: rest.pop(name) for name, field in _GUIDANCE_ARGUMENTS.items() if name in rest}
    return {**rest, "video": VideoRequest(**video), "guidance": GuidanceRequest(**guidance)}


def call_with_requests(pipeline: Any, run: Run, **inputs: Any) -> FinalLatents:
    """The final latents of a guided pipeline's prompt call with the run's requests (and `inputs`: its own)."""
    return pipeline.generate(run.prompt.text, **requests_of(run.call_arguments()), **inputs)


def build_guided(pipeline_class: Callable[..., P] | str, run: Run, **extra: Any) -> P:
    """`pipeline_class` over the run's model files (checkpoint, the upsampler of two-stage runs, Gemma) with
    the options every guided pipeline takes from its command line; `extra` adds the pipeline's own. A
    `module:Class` string is imported here, once the flags are checked (see `cli.lazy`)."""
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
    generate: Generate[P] = call_with_requests,
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
