"""Conditioning items: edits of a modality's token state (replace, append, mask) before sampling."""

from ltx_core.conditioning.attention import extend_attention_mask
from ltx_core.conditioning.audio_mask import AudioConditionByMask
from ltx_core.conditioning.item import ConditioningError, ConditioningItem, apply_conditionings
from ltx_core.conditioning.keyframe import VideoConditionByKeyframeIndex
from ltx_core.conditioning.keyframe_slots import VideoGeneratedKeyframeSlots, read_generated_keyframes
from ltx_core.conditioning.latent_index import VideoConditionByLatentIndex
from ltx_core.conditioning.masks import FrozenModality, TemporalRegionMask, VideoConditionByMask
from ltx_core.conditioning.reference_audio import AudioConditionByReferenceLatent
from ltx_core.conditioning.reference_video import VideoConditionByReferenceLatent

__all__ = [
    "AudioConditionByMask",
    "AudioConditionByReferenceLatent",
    "ConditioningError",
    "ConditioningItem",
    "FrozenModality",
    "TemporalRegionMask",
    "VideoConditionByKeyframeIndex",
    "VideoConditionByLatentIndex",
    "VideoConditionByMask",
    "VideoConditionByReferenceLatent",
    "VideoGeneratedKeyframeSlots",
    "apply_conditionings",
    "extend_attention_mask",
    "read_generated_keyframes",
]
