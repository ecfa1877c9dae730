"""The LTX-2.5 duration head and the frame-count prediction built on it."""

from ltx_core.model.duration_head.model import AttentionPooler, DurationHead, DurationHeadConfig
from ltx_core.model.duration_head.predictor import (
    DEFAULT_MAX_SECONDS,
    DEFAULT_MIN_SECONDS,
    DurationRange,
    frames_for_seconds,
    predict_num_frames,
)
from ltx_core.model.duration_head.spec import DURATION_HEAD, DURATION_HEAD_KEYS, duration_head_from_config

__all__ = [
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_MIN_SECONDS",
    "DURATION_HEAD",
    "DURATION_HEAD_KEYS",
    "AttentionPooler",
    "DurationHead",
    "DurationHeadConfig",
    "DurationRange",
    "duration_head_from_config",
    "frames_for_seconds",
    "predict_num_frames",
]
