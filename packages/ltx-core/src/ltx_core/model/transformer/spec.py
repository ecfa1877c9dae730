"""Building the transformer from a checkpoint: configurators and component specs per variant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltx_core.loader import TRANSFORMER_KEYS, Component, ComponentSpec
from ltx_core.model.transformer.config import ModelVariant, parse_transformer_config
from ltx_core.model.transformer.model import LTXModel


def transformer_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    section = config.get("transformer")
    if not isinstance(section, Mapping):
        raise ValueError(f"checkpoint config has no 'transformer' section (sections: {sorted(config)})")
    return section


def configure_transformer(config: Mapping[str, Any], variant: ModelVariant = ModelVariant.AUDIO_VIDEO) -> LTXModel:
    """The transformer described by a checkpoint's whole `config` metadata (uses its `transformer` section)."""
    return LTXModel(parse_transformer_config(transformer_section(config), variant))


def _configure_av(config: dict[str, Any]) -> LTXModel:
    return configure_transformer(config, ModelVariant.AUDIO_VIDEO)


def _configure_video_only(config: dict[str, Any]) -> LTXModel:
    return configure_transformer(config, ModelVariant.VIDEO_ONLY)


def _configure_audio_only(config: dict[str, Any]) -> LTXModel:
    return configure_transformer(config, ModelVariant.AUDIO_ONLY)


# File-key fragments of the audio stream and of the audio<->video coupling. Every audio module name
# starts with `audio_` (the coupling attentions `audio_to_video_attn` / `video_to_audio_attn` contain it too).
_AUDIO_FRAGMENTS = ("audio_",)
_COUPLING_FRAGMENTS = (".av_ca_", "_a2v_ca_", "audio_to_video_attn.", "video_to_audio_attn.")
# Video-stream module names, anchored on the preceding dot so `audio_attn1.` etc. do not match.
_VIDEO_FRAGMENTS = (
    ".patchify_proj.",
    ".adaln_single.",
    ".prompt_adaln_single.",
    ".caption_projection.",
    ".proj_out.",
    ".scale_shift_table",  # model- and block-level video tables, and the block's a2v tables
    ".prompt_scale_shift_table",
    ".attn1.",
    ".attn2.",
    ".ff.",
    ".keyframes_abs_pos_embedding",  # LTX-2.5: marks video keyframe tokens
)


def _dropping(ops, fragments: tuple[str, ...]):
    for fragment in fragments:
        ops = ops.dropping(contains=fragment)
    return ops


AV_TRANSFORMER_KEYS = TRANSFORMER_KEYS.named("av_transformer")
VIDEO_ONLY_TRANSFORMER_KEYS = _dropping(TRANSFORMER_KEYS, _AUDIO_FRAGMENTS + _COUPLING_FRAGMENTS).named(
    "video_only_transformer"
)
AUDIO_ONLY_TRANSFORMER_KEYS = _dropping(TRANSFORMER_KEYS, _VIDEO_FRAGMENTS + _COUPLING_FRAGMENTS).named(
    "audio_only_transformer"
)

_KIND = "an LTX-2 / LTX-2.3 single-file checkpoint with a 'transformer' config section"

AV_TRANSFORMER = ComponentSpec(
    name="audio-video transformer",
    ops=AV_TRANSFORMER_KEYS,
    configurator=_configure_av,
    config_section="transformer",
    expected_kind=_KIND,
    component=Component.TRANSFORMER,
)
VIDEO_ONLY_TRANSFORMER = ComponentSpec(
    name="video-only transformer",
    ops=VIDEO_ONLY_TRANSFORMER_KEYS,
    configurator=_configure_video_only,
    config_section="transformer",
    expected_kind=_KIND,
    component=Component.TRANSFORMER,
)
AUDIO_ONLY_TRANSFORMER = ComponentSpec(
    name="audio-only transformer",
    ops=AUDIO_ONLY_TRANSFORMER_KEYS,
    configurator=_configure_audio_only,
    config_section="transformer",
    expected_kind=_KIND,
    component=Component.TRANSFORMER,
)
