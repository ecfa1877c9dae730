"""A run's length from its prompt: the LTX-2.5 duration head reads the prompt's text contexts and
predicts seconds, clamped to a range and snapped to the video VAE's 8k+1 frame grid.

Pipelines call `predict_frame_count` after encoding the prompt, when the caller asked for a predicted
length (a `DurationRange`) instead of a frame count. Whether a set of model files can predict at all
(`has_duration_head`) is a header-only question, asked before anything loads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ltx_core.loader import CheckpointError, Component
from ltx_core.loader.model_files import ModelSource, model_files_of
from ltx_core.model.duration_head import DURATION_HEAD, DurationRange, predict_num_frames
from ltx_core.model.transformer.config import time_position_limit_seconds
from ltx_core.model.video_vae.vae_class import video_scale_factors
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.requests import VideoRequest

logger = logging.getLogger(__name__)

__all__ = [
    "DurationRange",
    "check_duration_range",
    "check_length_request",
    "check_video_length",
    "has_duration_head",
    "predict_frame_count",
    "refuse_duration",
    "requested_frames",
    "with_requested_frames",
]


def has_duration_head(checkpoint: ModelSource) -> bool:
    """Whether the model files carry a duration head (its own file, or `duration_head.*` in a single file)."""
    try:
        return model_files_of(checkpoint).info.has_duration_head
    except CheckpointError:
        return False


def predict_frame_count(
    checkpoint: ModelSource,
    placement: Placement,
    contexts: TextContexts,
    *,
    frame_rate: float,
    duration_range: DurationRange,
) -> int:
    """The frame count the duration head predicts for one prompt's `contexts` (batch 1), in
    `duration_range` seconds at `frame_rate`, on the video VAE's temporal grid (its factor read from the
    VAE's config). The head is loaded for the prediction and freed after it."""
    files = model_files_of(checkpoint)
    files.require(Component.DURATION_HEAD, purpose="predicting the video length (no --num-frames)")
    vae = files.info.configs.get("vae")
    time_factor = video_scale_factors(vae).time if isinstance(vae, dict) else 8
    video = contexts.video.to(device=placement.device, dtype=placement.dtype)
    audio = contexts.audio.to(device=placement.device, dtype=placement.dtype)
    with loaded(DURATION_HEAD, files, placement) as head:
        frames = predict_num_frames(
            head, video, audio, frame_rate=frame_rate, duration_range=duration_range, time_factor=time_factor
        )
    logger.info("duration head: %d frames (%.2f s at %g fps)", frames, frames / frame_rate, frame_rate)
    return frames


def check_duration_range(duration: DurationRange, transformer_config: Mapping[str, Any]) -> None:
    """Refuse a range the model cannot produce: the transformer places frames in time only up to its
    temporal RoPE extent (`time_position_limit_seconds`, 20 s in the released models), so a predicted length
    beyond it would be clamped into a clip longer than the positions the model was trained on."""
    limit = time_position_limit_seconds(transformer_config)
    if duration.max_seconds > limit:
        raise ValueError(
            f"the range [{duration.min_seconds:g}, {duration.max_seconds:g}] s goes beyond the {limit:g} s the model's "
            f"temporal positions span (positional_embedding_max_pos); accepted: 0 < MIN_SECONDS <= MAX_SECONDS <= "
            f"{limit:g}"
        )


def check_length_request(checkpoint: ModelSource, num_frames: int | None, duration: DurationRange | None) -> None:
    """A pipeline call asks for its length one way: a frame count, or a `duration` range for the duration
    head (then the model files must carry one, and the range must be one the model can produce). Checked
    before the prompt is encoded."""
    if (num_frames is None) == (duration is None):
        raise ValueError(f"give num_frames or duration, not both or neither (got {num_frames}, {duration})")
    if duration is not None and not has_duration_head(checkpoint):
        raise ValueError("duration needs model files with a duration head (ModelFiles.split(duration_head=...))")
    if duration is not None:
        check_duration_range(duration, model_files_of(checkpoint).info.section("transformer"))


def requested_frames(
    checkpoint: ModelSource,
    placement: Placement,
    contexts: TextContexts,
    *,
    num_frames: int | None,
    duration: DurationRange | None,
    frame_rate: float,
) -> int:
    """The frame count a call asked for: `num_frames`, or the duration head's prediction in `duration`."""
    if duration is None:
        assert num_frames is not None, "check_length_request first"
        return num_frames
    return predict_frame_count(checkpoint, placement, contexts, frame_rate=frame_rate, duration_range=duration)


def check_video_length(checkpoint: ModelSource, video: VideoRequest) -> None:
    """`check_length_request` for a request as the caller gave it (before `fill_video`): one that gives a
    `duration` range must leave `num_frames` unset and run on model files with a duration head (filling
    gives any other request a frame count)."""
    if video.duration is not None:
        check_length_request(checkpoint, video.num_frames, video.duration)


def with_requested_frames(
    checkpoint: ModelSource, placement: Placement, contexts: TextContexts, video: VideoRequest
) -> VideoRequest:
    """`video` with its length decided: its frame count, or the duration head's pick in its `duration` range
    (`check_video_length` first)."""
    assert video.frame_rate is not None, "fill the request first"
    frames = requested_frames(
        checkpoint, placement, contexts, num_frames=video.num_frames, duration=video.duration,
        frame_rate=video.frame_rate,
    )  # fmt: skip
    return video.with_frames(frames)


def refuse_duration(video: VideoRequest, pipeline: str) -> None:
    """Refuse a `duration` range on a pipeline whose length is its inputs' or the caller's frame count."""
    if video.duration is not None:
        raise ValueError(f"{pipeline} takes a frame count (num_frames), not a duration range (got {video.duration})")
