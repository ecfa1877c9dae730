"""The LTX-2.5 duration head and the frame-count prediction built on it."""

from __future__ import annotations

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "AttentionPooler": "ltx_core.model.duration_head.model",
    "DurationHead": "ltx_core.model.duration_head.model",
    "DurationHeadConfig": "ltx_core.model.duration_head.model",
    "DEFAULT_MAX_SECONDS": "ltx_core.model.duration_head.duration_range",
    "DEFAULT_MIN_SECONDS": "ltx_core.model.duration_head.duration_range",
    "DurationRange": "ltx_core.model.duration_head.duration_range",
    "frames_for_seconds": "ltx_core.model.duration_head.duration_range",
    "predict_num_frames": "ltx_core.model.duration_head.predictor",
    "DURATION_HEAD": "ltx_core.model.duration_head.spec",
    "DURATION_HEAD_KEYS": "ltx_core.model.duration_head.spec",
    "duration_head_from_config": "ltx_core.model.duration_head.spec",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
