"""The transformer's architecture, read and validated from a checkpoint's `config["transformer"]`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ltx_core.model.transformer.rope import RopeType

# Fields whose value the architecture hard-wires: a config that names another value describes a
# model this implementation does not build. An absent field means the default below.
FIXED_FIELDS: dict[str, Any] = {
    "activation_fn": "gelu-approximate",
    "attention_bias": True,
    "attention_type": "default",
    "cross_attention_norm": True,
    "double_self_attention": False,
    "dropout": 0.0,
    "norm_elementwise_affine": False,
    "num_embeds_ada_norm": 1000,
    "num_vector_embeds": None,
    "only_cross_attention": False,
    "positional_embedding_type": "rope",
    "qk_norm": "rms_norm",
    "share_ff": False,
    "standardization_norm": "rms_norm",
    "upcast_attention": False,
    "use_linear_projection": False,
    "use_middle_indices_grid": True,
}
# Only meaningful when both modalities are built.
FIXED_AV_FIELDS: dict[str, Any] = {
    "use_audio_video_cross_attention": True,
    "av_cross_ada_norm": True,
}

# LTX-2.3 moved the caption projection in front of the connector; all four fields must then be
# present with exactly these values (the "V2" text path). None of them present means LTX-2 ("V1").
V2_TEXT_PATH_FIELDS: dict[str, bool] = {
    "caption_proj_before_connector": True,
    "caption_projection_first_linear": False,
    "caption_proj_input_norm": False,
    "caption_projection_second_linear": False,
}

_FREQUENCY_PRECISIONS = ("float32", "float64")


class ModelVariant(Enum):
    """Which streams a transformer carries; the other stream's weights are never allocated."""

    AUDIO_VIDEO = "audio_video"
    VIDEO_ONLY = "video_only"
    AUDIO_ONLY = "audio_only"

    @property
    def has_video(self) -> bool:
        return self is not ModelVariant.AUDIO_ONLY

    @property
    def has_audio(self) -> bool:
        return self is not ModelVariant.VIDEO_ONLY


def _fail(field: str, value: Any, accepted: str) -> ValueError:
    return ValueError(f"transformer config field {field!r} is {value!r}; accepted: {accepted}")


def uses_v2_text_path(config: Mapping[str, Any]) -> bool:
    """True for the LTX-2.3 text path (projection before the connector), False for LTX-2.

    Raises ValueError for a partial or otherwise unknown combination of the V2 fields.
    """
    present = {k for k in V2_TEXT_PATH_FIELDS if k in config}
    if not present:
        return False
    missing = sorted(set(V2_TEXT_PATH_FIELDS) - present)
    if missing:
        raise ValueError(
            f"transformer config sets {sorted(present)} but not {missing}: the LTX-2.3 text path needs all of "
            f"{V2_TEXT_PATH_FIELDS}, the LTX-2 path none of them"
        )
    for field, expected in V2_TEXT_PATH_FIELDS.items():
        if config[field] != expected:
            raise _fail(field, config[field], f"{expected!r} (with the other LTX-2.3 text-path fields)")
    return True


def _int_tuple(config: Mapping[str, Any], field: str, default: tuple[int, ...]) -> tuple[int, ...]:
    value = config.get(field, default)
    if not isinstance(value, (list, tuple)) or not value or any(not isinstance(v, (int, float)) for v in value):
        raise _fail(field, value, "a non-empty list of positive numbers")
    if any(v <= 0 for v in value):
        raise _fail(field, value, "a non-empty list of positive numbers")
    return tuple(value)


def _positive_int(config: Mapping[str, Any], field: str, default: int) -> int:
    value = config.get(field, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise _fail(field, value, "a positive integer")
    return value


def _flag(config: Mapping[str, Any], field: str, default: bool) -> bool:
    value = config.get(field, default)
    if not isinstance(value, bool):
        raise _fail(field, value, "true or false")
    return value


def _number(config: Mapping[str, Any], field: str, default: float) -> float:
    value = config.get(field, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise _fail(field, value, "a positive number")
    return value


@dataclass(frozen=True)
class StreamConfig:
    """Sizes of one modality stream (video or audio)."""

    heads: int
    head_dim: int
    in_channels: int
    out_channels: int
    context_dim: int  # width of the text context the stream cross-attends to
    max_pos: tuple[int, ...]  # RoPE extent per position axis
    ff_bias: bool = True

    @property
    def dim(self) -> int:
        return self.heads * self.head_dim


@dataclass(frozen=True)
class TransformerConfig:
    """Everything the audio-video DiT needs to be built; `None` streams are not built."""

    variant: ModelVariant
    video: StreamConfig | None
    audio: StreamConfig | None
    num_layers: int = 48
    norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_type: RopeType = RopeType.SPLIT
    float64_frequencies: bool = False
    timestep_scale_multiplier: float = 1000
    av_ca_timestep_scale_multiplier: float = 1
    apply_gated_attention: bool = False
    cross_attention_adaln: bool = False
    use_prompt_adaln_single: bool = True
    # LTX-2.5: a learned (1, D) video embedding added to the tokens a keyframes mask marks.
    keyframes_abs_pos_embedding: bool = False
    # LTX-2 only: the text contexts arrive `caption_channels` wide and the transformer projects them.
    caption_channels: int | None = None

    @property
    def adaln_rows(self) -> int:
        """Modulation rows per block: shift/scale/gate for self-attention and FFN (+ text cross-attention)."""
        return 9 if self.cross_attention_adaln else 6

    @property
    def has_prompt_adaln(self) -> bool:
        return self.cross_attention_adaln and self.use_prompt_adaln_single

    @property
    def cross_modal_max_pos(self) -> int:
        """The audio<->video attention rotates by time only, over the larger of the two time extents."""
        if self.video is None or self.audio is None:
            raise ValueError("cross-modal positions need both streams")
        return max(self.video.max_pos[0], self.audio.max_pos[0])


def rope_settings(config: Mapping[str, Any]) -> tuple[RopeType, bool]:
    """(rope type, float64 frequency grid) from a transformer config section."""
    raw_type = config.get("rope_type", RopeType.SPLIT.value)
    try:
        rope_type = RopeType(raw_type)
    except ValueError:
        raise _fail("rope_type", raw_type, str([t.value for t in RopeType])) from None
    precision = config.get("frequencies_precision", "float32")
    if precision not in _FREQUENCY_PRECISIONS:
        raise _fail("frequencies_precision", precision, str(list(_FREQUENCY_PRECISIONS)))
    return rope_type, precision == "float64"


def time_position_limit_seconds(config: Mapping[str, Any]) -> float:
    """The seconds the temporal RoPE positions span (`positional_embedding_max_pos[0]`, and the audio
    stream's `audio_positional_embedding_max_pos[0]`: positions are in seconds), from a transformer config
    section: the longest clip the model was built to place in time."""
    video = _int_tuple(config, "positional_embedding_max_pos", (20, 2048, 2048))[0]
    audio = _int_tuple(config, "audio_positional_embedding_max_pos", (20,))[0]
    return float(min(video, audio))


@dataclass(frozen=True)
class _StreamDefaults:
    """Where one stream's fields sit in the `transformer` section (audio keys are the video keys with an
    `audio_` prefix) and the defaults that differ between the streams."""

    prefix: str
    head_dim: int
    context_dim: int
    max_pos: tuple[int, ...]


_VIDEO_STREAM = _StreamDefaults(prefix="", head_dim=128, context_dim=4096, max_pos=(20, 2048, 2048))
_AUDIO_STREAM = _StreamDefaults(prefix="audio_", head_dim=64, context_dim=2048, max_pos=(20,))


def _parse_stream(config: Mapping[str, Any], stream: _StreamDefaults) -> StreamConfig:
    p = stream.prefix
    return StreamConfig(
        heads=_positive_int(config, f"{p}num_attention_heads", 32),
        head_dim=_positive_int(config, f"{p}attention_head_dim", stream.head_dim),
        in_channels=_positive_int(config, f"{p}in_channels", 128),
        out_channels=_positive_int(config, f"{p}out_channels", 128),
        context_dim=_positive_int(config, f"{p}cross_attention_dim", stream.context_dim),
        max_pos=_int_tuple(config, f"{p}positional_embedding_max_pos", stream.max_pos),
        ff_bias=_flag(config, f"{p}ff_bias", True),
    )


def _check_fixed_fields(config: Mapping[str, Any], variant: ModelVariant) -> None:
    fixed = dict(FIXED_FIELDS)
    if variant is ModelVariant.AUDIO_VIDEO:
        fixed.update(FIXED_AV_FIELDS)
    for field, expected in fixed.items():
        if field in config and config[field] != expected:
            raise _fail(field, config[field], repr(expected))


def _caption_channels(config: Mapping[str, Any]) -> int | None:
    """The caption width the LTX-2 text path projects from (None: the LTX-2.3 path, projected before the
    transformer), with the text encoder normalisation checked to belong to the same path."""
    v2_text = uses_v2_text_path(config)
    caption_channels = None if v2_text else _positive_int(config, "caption_channels", 3840)
    norm_type = config.get("text_encoder_norm_type")
    if v2_text and norm_type not in (None, "per_token_rms"):
        raise _fail("text_encoder_norm_type", norm_type, "'per_token_rms' (LTX-2.3 text path)")
    if not v2_text and norm_type == "per_token_rms":
        raise _fail(
            "text_encoder_norm_type",
            norm_type,
            "the LTX-2 range normalisation (per_token_rms needs the LTX-2.3 text-path fields)",
        )
    return caption_channels


def _check_streams(video: StreamConfig | None, audio: StreamConfig | None) -> None:
    for stream in (video, audio):
        if stream is not None and stream.head_dim % 2:
            raise ValueError(f"attention head dim must be even for rotary embeddings, got {stream.head_dim}")
    # Contexts reach the text cross-attention at the stream's width: projected by the text stage
    # (LTX-2.3) or by the caption projection, whose output is the stream width (LTX-2).
    for name, stream in (("cross_attention_dim", video), ("audio_cross_attention_dim", audio)):
        if stream is not None and stream.context_dim != stream.dim:
            raise _fail(name, stream.context_dim, f"{stream.dim} (the stream's heads x head dim)")


def parse_transformer_config(config: Mapping[str, Any], variant: ModelVariant) -> TransformerConfig:
    """Validate `config` (the checkpoint's `transformer` section) and return the architecture."""
    if not isinstance(config, Mapping):
        raise ValueError(f"transformer config must be a JSON object, got {type(config).__name__}")
    _check_fixed_fields(config, variant)
    rope_type, float64_frequencies = rope_settings(config)
    caption_channels = _caption_channels(config)
    video = _parse_stream(config, _VIDEO_STREAM) if variant.has_video else None
    audio = _parse_stream(config, _AUDIO_STREAM) if variant.has_audio else None
    _check_streams(video, audio)
    return TransformerConfig(
        variant=variant,
        video=video,
        audio=audio,
        num_layers=_positive_int(config, "num_layers", 48),
        norm_eps=_number(config, "norm_eps", 1e-6),
        rope_theta=_number(config, "positional_embedding_theta", 10000.0),
        rope_type=rope_type,
        float64_frequencies=float64_frequencies,
        timestep_scale_multiplier=_number(config, "timestep_scale_multiplier", 1000),
        av_ca_timestep_scale_multiplier=_number(config, "av_ca_timestep_scale_multiplier", 1),
        apply_gated_attention=_flag(config, "apply_gated_attention", False),
        cross_attention_adaln=_flag(config, "cross_attention_adaln", False),
        use_prompt_adaln_single=_flag(config, "use_prompt_adaln_single", True),
        keyframes_abs_pos_embedding=variant.has_video and _flag(config, "use_keyframes_abs_pos_embedding", False),
        caption_channels=caption_channels,
    )
