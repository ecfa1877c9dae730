"""The LTX-2 audio-video diffusion transformer."""

from ltx_core.model.transformer.attention import Attention
from ltx_core.model.transformer.attention_backends import AttentionBackend, attend, sdpa_attention, select_backend
from ltx_core.model.transformer.block import AVTransformerBlock, StreamState
from ltx_core.model.transformer.config import (
    ModelVariant,
    StreamConfig,
    TransformerConfig,
    parse_transformer_config,
    uses_v2_text_path,
)
from ltx_core.model.transformer.model import LTXModel, Modality, X0Model, to_denoised
from ltx_core.model.transformer.rope import RopeType, RotaryEmbedding, apply_rotary, rotary_embedding
from ltx_core.model.transformer.spec import (
    AUDIO_ONLY_TRANSFORMER,
    AUDIO_ONLY_TRANSFORMER_KEYS,
    AV_TRANSFORMER,
    AV_TRANSFORMER_KEYS,
    VIDEO_ONLY_TRANSFORMER,
    VIDEO_ONLY_TRANSFORMER_KEYS,
    configure_transformer,
)

__all__ = [
    "AUDIO_ONLY_TRANSFORMER",
    "AUDIO_ONLY_TRANSFORMER_KEYS",
    "AV_TRANSFORMER",
    "AV_TRANSFORMER_KEYS",
    "VIDEO_ONLY_TRANSFORMER",
    "VIDEO_ONLY_TRANSFORMER_KEYS",
    "AVTransformerBlock",
    "Attention",
    "AttentionBackend",
    "LTXModel",
    "Modality",
    "ModelVariant",
    "RopeType",
    "RotaryEmbedding",
    "StreamConfig",
    "StreamState",
    "TransformerConfig",
    "X0Model",
    "apply_rotary",
    "attend",
    "configure_transformer",
    "parse_transformer_config",
    "rotary_embedding",
    "sdpa_attention",
    "select_backend",
    "to_denoised",
    "uses_v2_text_path",
]
