"""Generated keyframes on the prompt pipelines: extra one-pixel-frame slots that stage 1 generates.

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

from collections.abc import Sequence
from itertools import pairwise

import torch

from ltx_core.conditioning import ConditioningItem, VideoGeneratedKeyframeSlots
from ltx_core.loader import CheckpointError
from ltx_core.loader.model_files import ModelSource, model_files_of
from ltx_pipelines.engine.requests import GeneratedKeyframes

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


def generated_keyframe_slots(request: GeneratedKeyframes, num_frames: int) -> list[ConditioningItem]:
    """The stage-1 item that appends the requested slots (one item, so their tokens are one contiguous
    range at the end of the state), or none when nothing is requested."""
    positions = generated_keyframe_positions(request, num_frames)
    return [VideoGeneratedKeyframeSlots(positions)] if positions else []


def _shown(request: GeneratedKeyframes) -> str:
    return str(request) if isinstance(request, int) else str([int(p) for p in request])
