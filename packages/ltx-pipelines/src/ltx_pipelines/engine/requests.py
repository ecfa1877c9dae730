"""What a caller asks a pipeline for, as values: the video (`VideoRequest`) and, on the guided pipelines, the
guidance (`GuidanceRequest`). The command line builds them from its flag groups, the server from a request
body, a notebook by hand; every pipeline takes them in `generate(prompt, seed=..., video=..., guidance=...)`
and `latents_from_contexts(...)`, so no pipeline repeats a dozen keyword arguments.

A field left None takes the default of the checkpoint's model version (`fill_video`): a notebook call needs only
the prompt and the seed. Light on purpose (no torch): the command lines build these while checking flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ltx_core.components.guider_params import MultiModalGuiderParams
from ltx_core.model.duration_head.duration_range import DurationRange

if TYPE_CHECKING:
    from ltx_pipelines.engine.defaults import PipelineDefaults
    from ltx_pipelines.engine.stage_blocks import ImageCondition

GeneratedKeyframes = int | Sequence[int]
"""A stage-1 keyframe request: a count of evenly spaced interior frames, or explicit pixel-frame indices."""


@dataclass(frozen=True)
class VideoRequest:
    """The output asked for: size, length, frame rate, conditioning images and generated keyframes.

    `num_frames` None with a `duration` range: the duration head (LTX-2.5 files that have one) picks the
    length from the prompt, in that range of seconds. Fields left None are filled by `fill_video`.
    """

    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    frame_rate: float | None = None
    images: tuple[ImageCondition, ...] = ()
    generated_keyframes: GeneratedKeyframes = 0
    duration: DurationRange | None = None

    def __post_init__(self) -> None:
        # A list given for images is kept as a tuple: the value stays hashable-looking and immutable.
        object.__setattr__(self, "images", tuple(self.images))

    @property
    def size(self) -> tuple[int, int, int, float]:
        """(height, width, num_frames, frame_rate) of a filled request."""
        missing = [name for name in ("height", "width", "num_frames", "frame_rate") if getattr(self, name) is None]
        if missing:
            raise ValueError(f"video request leaves {missing} unset; fill it first (fill_video)")
        assert self.height is not None and self.width is not None
        assert self.num_frames is not None and self.frame_rate is not None
        return self.height, self.width, self.num_frames, self.frame_rate

    def with_frames(self, num_frames: int) -> VideoRequest:
        """The request with its length decided (the duration head's pick)."""
        return replace(self, num_frames=num_frames, duration=None)

    def parameters(self) -> dict[str, Any]:
        """The request's fields as the sidecar records a call's arguments (the names `VIDEO_FIELDS` gathers)."""
        return {name: getattr(self, name) for name in VIDEO_FIELDS}


def fill_video(
    request: VideoRequest, defaults: PipelineDefaults, *, two_stage: bool, predicts_duration: bool
) -> VideoRequest:
    """`request` with what it leaves unset taken as the command line takes it: the model version's defaults
    (two-stage pipelines: twice the stage-1 size); a length left unset on model files with a duration head
    (`predicts_duration`) is the head's pick in its default range."""
    filled = replace(
        request,
        height=request.height if request.height is not None else (
            defaults.two_stage_height if two_stage else defaults.height
        ),
        width=request.width if request.width is not None else (
            defaults.two_stage_width if two_stage else defaults.width
        ),
        frame_rate=request.frame_rate if request.frame_rate is not None else defaults.frame_rate,
    )  # fmt: skip
    if request.num_frames is not None:
        return filled
    if predicts_duration:
        return replace(filled, duration=request.duration or DurationRange())
    return replace(filled, num_frames=defaults.num_frames)


@dataclass(frozen=True)
class GuidanceRequest:
    """How a guided pipeline steers its guided stage: the negative prompt (None: the default one), the step
    count and each modality's guidance (None: the model version's, or the pipeline's preset)."""

    negative_prompt: str | None = None
    num_inference_steps: int | None = None
    video: MultiModalGuiderParams | None = None
    audio: MultiModalGuiderParams | None = None

    def parameters(self) -> dict[str, Any]:
        """The request's fields as the sidecar records a call's arguments (the names `GUIDANCE_FIELDS` gathers)."""
        return {name: getattr(self, field) for name, field in GUIDANCE_FIELDS.items()}


VIDEO_FIELDS = ("height", "width", "num_frames", "frame_rate", "images", "generated_keyframes", "duration")
"""The call arguments a `VideoRequest` gathers (its field names)."""
GUIDANCE_FIELDS = {
    "negative_prompt": "negative_prompt",
    "num_inference_steps": "num_inference_steps",
    "video_guidance": "video",
    "audio_guidance": "audio",
}
"""The call arguments a `GuidanceRequest` gathers, by the name a command line records -> its field."""


def packed_requests(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Flat call arguments (what a command line's flag groups contribute, under the names its sidecar records)
    with the video ones gathered into `video=VideoRequest(...)` and the guidance ones into
    `guidance=GuidanceRequest(...)`; a request nobody contributed to is left out (the pipeline's default)."""
    rest = dict(arguments)
    video = {name: rest.pop(name) for name in VIDEO_FIELDS if name in rest}
    guidance = {field: rest.pop(name) for name, field in GUIDANCE_FIELDS.items() if name in rest}
    if video:
        rest["video"] = VideoRequest(**video)
    if guidance:
        rest["guidance"] = GuidanceRequest(**guidance)
    return rest
