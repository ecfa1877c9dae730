"""What a caller asks a pipeline for, as values: the video (`VideoRequest`) and, on the guided pipelines, the
guidance (`GuidanceRequest`). The command line builds them from its flag groups, the server from a request
body, a notebook by hand; every pipeline takes them in `generate(prompt, seed=..., video=..., guidance=...)`
and `latents_from_contexts(...)`, so no pipeline repeats a dozen keyword arguments.

A field left None takes the default of the checkpoint's model version (`PromptPipeline.filled_video`): a
notebook call needs only the prompt and the seed. Light on purpose (no torch): the command lines build these
while checking flags.

Generated keyframes on the prompt pipelines: extra one-pixel-frame slots that stage 1 generates.

A request is a count or explicit pixel-frame indices (`GeneratedKeyframes = int | Sequence[int]`). A count
`n` places `n` slots at evenly spaced interior frames of an `F`-frame clip: the points of
`linspace(0, F - 1, n + 2)` (float32, rounded half to even, as torch rounds) without the two ends. Explicit
indices must be strictly increasing and lie in `[1, F)` (frame 0 is the first latent frame itself).

Each slot costs a latent frame of tokens and yields one generated pixel frame; slots are appended after
every other video token (so at batch 1 the target tokens draw the same noise with or without them) and
are dropped before the next stage, which never gets slots on these pipelines. Only a transformer trained
with the keyframe absolute-position embedding (`use_keyframes_abs_pos_embedding`) can tell the slots
apart, so any other transformer is refused before anything is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.guider_params import MultiModalGuiderParams
from ltx_core.conditioning import ConditioningItem, VideoGeneratedKeyframeSlots
from ltx_core.loader import CheckpointError
from ltx_core.loader.model_files import ModelSource, model_files_of
from ltx_core.model.duration_head.duration_range import DurationRange
from ltx_core.types import VideoPixelShape

if TYPE_CHECKING:
    from ltx_pipelines.engine.denoising_stage import ImageCondition


GeneratedKeyframes = int | Sequence[int]


"""A stage-1 keyframe request: a count of evenly spaced interior frames, or explicit pixel-frame indices."""


@dataclass(frozen=True)
class VideoRequest:
    """The output asked for: size, length, frame rate, conditioning images and generated keyframes.

    `num_frames` None with a `duration` range: the duration head (LTX-2.5 files that have one) picks the
    length from the prompt, in that range of seconds. Fields left None are filled by `PromptPipeline.filled_video`.
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
            raise ValueError(f"video request leaves {missing} unset; fill it first (filled_video)")
        assert self.height is not None and self.width is not None
        assert self.num_frames is not None and self.frame_rate is not None
        return self.height, self.width, self.num_frames, self.frame_rate

    def pixel_shape(self, spatial_multiple: int) -> VideoPixelShape:
        """The output shape of a filled request (batch 1), checked against the model's grid: height and width
        multiples of `spatial_multiple`, an 8k+1 frame count."""
        height, width, num_frames, frame_rate = self.size
        shape = VideoPixelShape(1, num_frames, height, width, frame_rate)
        shape.check(spatial_multiple=spatial_multiple)
        return shape

    def with_frames(self, num_frames: int) -> VideoRequest:
        """The request with its length decided (the duration head's pick)."""
        return replace(self, num_frames=num_frames, duration=None)

    def parameters(self) -> dict[str, Any]:
        """The request's fields as the sidecar records a call's arguments (the names `VIDEO_FIELDS` gathers; the
        images as a list, as JSON has them)."""
        return {**{name: getattr(self, name) for name in VIDEO_FIELDS}, "images": list(self.images)}


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


STAGE_1_KEYFRAMES = "stage_1.video_generated_keyframes"


"""The name the stage-1 slots' latent (B, C, K, h, w) is kept under in `FinalLatents.stage_latents`."""


def keyframe_embedding_problem(checkpoint: ModelSource) -> str | None:
    """Why a checkpoint's transformer cannot generate keyframe slots (no keyframe embedding in its config),
    or None. Reads only the config (a diffusers folder's translated): answered before any weight is built, from
    the set's `info` (`CheckpointInfo.keyframe_embedding_problem`)."""
    try:
        return model_files_of(checkpoint).info.keyframe_embedding_problem
    except (CheckpointError, OSError, ValueError) as e:
        return f"its transformer config cannot be read ({e})"


def has_generated_keyframes(request: GeneratedKeyframes) -> bool:
    """Whether a request asks for any slot (a sequence may be a tensor: never test its truth value)."""
    if isinstance(request, int):
        return request > 0
    return len(request) > 0


def require_keyframe_embedding(checkpoint: ModelSource, request: GeneratedKeyframes) -> None:
    """Raise (ValueError) when slots are requested from a transformer without the keyframe embedding: its
    slots would be unmarked tokens that cost a latent frame each for nothing."""
    if not has_generated_keyframes(request):
        return
    problem = keyframe_embedding_problem(checkpoint)
    if problem is not None:
        raise ValueError(f"generated keyframes ({_shown(request)}) cannot run on {checkpoint}: {problem}")


def evenly_spaced_keyframe_positions(count: int, num_frames: int) -> tuple[int, ...]:
    """`count` interior pixel frames of a `num_frames` clip, evenly spaced, both ends excluded."""
    if count == 0:
        return ()
    # torch's float32 linspace and half-to-even rounding: the positions the released pipelines use.
    points = torch.linspace(0, num_frames - 1, count + 2).round().to(torch.int64).tolist()
    return tuple(points[1:-1])


def generated_keyframe_positions(request: GeneratedKeyframes, num_frames: int) -> tuple[int, ...]:
    """The pixel frames a request puts slots at (empty: none), checked against a `num_frames` clip."""
    if isinstance(request, bool) or not isinstance(request, (int, Sequence, torch.Tensor)):
        raise ValueError(f"generated_keyframes must be a count or a sequence of frame indices, got {request!r}")
    interior = max(num_frames - 2, 0)
    if isinstance(request, int):
        if not 0 <= request <= interior:
            raise ValueError(
                f"generated_keyframes {request} is not accepted: a {num_frames}-frame clip takes 0 to {interior} "
                "evenly spaced interior keyframes (both end frames are excluded)"
            )
        return evenly_spaced_keyframe_positions(request, num_frames)
    positions = tuple(int(p) for p in request)
    increasing = all(b > a for a, b in pairwise(positions))
    if positions and (not increasing or positions[0] < 1 or positions[-1] >= num_frames):
        raise ValueError(
            f"generated_keyframes {list(positions)} is not accepted: explicit keyframe frames must be strictly "
            f"increasing and lie in [1, {num_frames}) (frame 0 is the clip's first latent frame)"
        )
    return positions


def checked_keyframe_positions(
    checkpoint: ModelSource, request: GeneratedKeyframes, num_frames: int | None
) -> tuple[int, ...]:
    """The pixel frames `request` puts slots at, checked against the checkpoint's keyframe embedding
    (`require_keyframe_embedding`) and a `num_frames` clip (None: a length still to be predicted, checked once
    it is known)."""
    require_keyframe_embedding(checkpoint, request)
    return () if num_frames is None else generated_keyframe_positions(request, num_frames)


def generated_keyframe_slots(
    checkpoint: ModelSource, request: GeneratedKeyframes, num_frames: int
) -> list[ConditioningItem]:
    """The stage-1 item that appends the requested slots (one item, so their tokens are one contiguous
    range at the end of the state), or none when nothing is requested; checked as `checked_keyframe_positions`."""
    positions = checked_keyframe_positions(checkpoint, request, num_frames)
    return [VideoGeneratedKeyframeSlots(positions)] if positions else []


def _shown(request: GeneratedKeyframes) -> str:
    return str(request) if isinstance(request, int) else str([int(p) for p in request])
