"""Gemma hidden states -> the video / audio text contexts the transformer cross-attends to.

Feature extraction (V1 or V2, see `feature_extractor`), then a stable re-ordering of every row so
its valid tokens come first, the per-modality embeddings connectors, and for video a multiplication
by the returned mask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ltx_core.loader import TEXT_EMBEDDINGS_KEYS, CheckpointError, Component, ComponentSpec
from ltx_core.model.transformer.config import rope_settings, uses_v2_text_path
from ltx_core.text_encoders.gemma.connector import ConnectorConfig, EmbeddingsConnector
from ltx_core.text_encoders.gemma.feature_extractor import (
    FeatureExtractorV1,
    FeatureExtractorV2,
    stack_hidden_states,
)

# Gemma 3 12B: 3840-wide hidden states, 48 decoder layers + the embedding output.
GEMMA3_12B_HIDDEN_SIZE = 3840
GEMMA3_12B_NUM_HIDDEN_STATES = 49


@dataclass(frozen=True)
class TextContexts:
    """Per-modality text contexts: video (B, S, Dv), audio (B, S, Da) or None, mask (B, S) int64 1 = visible."""

    video: torch.Tensor
    audio: torch.Tensor | None
    mask: torch.Tensor


def valid_first_order(valid: torch.Tensor) -> torch.Tensor:
    """(B, S) indices that move each row's valid tokens to the front, keeping their order."""
    return torch.argsort(valid.to(torch.int32), dim=-1, descending=True, stable=True)


def _gather_tokens(x: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, order[:, :, None].expand(-1, -1, x.shape[-1]))


class EmbeddingsProcessor(nn.Module):
    def __init__(
        self,
        feature_extractor: FeatureExtractorV1 | FeatureExtractorV2,
        video_connector: EmbeddingsConnector,
        audio_connector: EmbeddingsConnector | None,
    ) -> None:
        super().__init__()
        self.feature_extractor = feature_extractor
        self.video_connector = video_connector
        self.audio_connector = audio_connector

    def extract_features(
        self, hidden_states: Sequence[torch.Tensor] | torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-modality features (before the connectors), tokens in input order."""
        stacked = stack_hidden_states(hidden_states)
        fe = self.feature_extractor
        b, s, h, layers = stacked.shape
        if (h, layers) != (fe.hidden_size, fe.num_hidden_states):
            raise ValueError(
                f"got {layers} hidden states of width {h}; this text embeddings stage expects "
                f"{fe.num_hidden_states} of width {fe.hidden_size}"
            )
        if tuple(attention_mask.shape) != (b, s):
            raise ValueError(f"attention_mask must be (B, S) = {(b, s)}, got {tuple(attention_mask.shape)}")
        return fe(stacked, attention_mask)

    def forward(
        self, hidden_states: Sequence[torch.Tensor] | torch.Tensor, attention_mask: torch.Tensor
    ) -> TextContexts:
        video, audio = self.extract_features(hidden_states, attention_mask)
        order = valid_first_order(attention_mask)
        valid = torch.gather(attention_mask.bool(), 1, order)
        video_enc, mask = self.video_connector(_gather_tokens(video, order), valid)
        video_enc = video_enc * mask[:, :, None].to(video_enc.dtype)
        audio_enc = None
        if self.audio_connector is not None:
            audio_enc, _ = self.audio_connector(_gather_tokens(audio, order), valid)
        return TextContexts(video=video_enc, audio=audio_enc, mask=mask)


# -- configuration --------------------------------------------------------------------------------
def _fail(field: str, value: Any, accepted: str) -> ValueError:
    return ValueError(f"transformer config field {field!r} is {value!r}; accepted: {accepted}")


def _int(config: Mapping[str, Any], field: str, default: int, minimum: int = 1) -> int:
    value = config.get(field, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _fail(field, value, f"an integer >= {minimum}")
    return value


def _bool(config: Mapping[str, Any], field: str, default: bool) -> bool:
    value = config.get(field, default)
    if not isinstance(value, bool):
        raise _fail(field, value, "true or false")
    return value


def connector_configs(config: Mapping[str, Any]) -> tuple[ConnectorConfig, ConnectorConfig]:
    """(video, audio) connector settings; every `audio_connector_*` field falls back to `connector_*`."""
    rope_type, float64 = rope_settings(config)
    max_pos = config.get("connector_positional_embedding_max_pos", [1])
    if not isinstance(max_pos, (list, tuple)) or len(max_pos) != 1 or not isinstance(max_pos[0], (int, float)):
        raise _fail("connector_positional_embedding_max_pos", max_pos, "a one-element list (1-D positions)")

    def build(prefix: str, fallback: ConnectorConfig | None) -> ConnectorConfig:
        def pick(name: str, default: Any) -> Any:
            return getattr(fallback, name) if fallback is not None else default

        fields = {**config}
        return ConnectorConfig(
            heads=_int(fields, f"{prefix}num_attention_heads", pick("heads", 30)),
            head_dim=_int(fields, f"{prefix}attention_head_dim", pick("head_dim", 128)),
            num_layers=_int(fields, f"{prefix}num_layers", pick("num_layers", 2), minimum=0),
            max_pos=tuple(max_pos),
            num_registers=_int(fields, f"{prefix}num_learnable_registers", pick("num_registers", 128), minimum=0),
            gated_attention=_bool(fields, f"{prefix}apply_gated_attention", pick("gated_attention", False)),
            ff_bias=_bool(fields, f"{prefix}ff_bias", pick("ff_bias", True)),
            rope_type=rope_type,
            float64_frequencies=float64,
        )

    video = build("connector_", None)
    audio = build("audio_connector_", video)
    for prefix, cfg in (("connector_", video), ("audio_connector_", audio)):
        if cfg.head_dim % 2:
            raise _fail(f"{prefix}attention_head_dim", cfg.head_dim, "an even number (rotary embeddings)")
    return video, audio


def configure_embeddings_processor(
    config: Mapping[str, Any],
    gemma_hidden_size: int = GEMMA3_12B_HIDDEN_SIZE,
    gemma_num_hidden_states: int = GEMMA3_12B_NUM_HIDDEN_STATES,
    with_audio: bool = True,
) -> EmbeddingsProcessor:
    """The text embeddings stage for a checkpoint's whole `config` metadata (its `transformer` section)."""
    section = config.get("transformer")
    if not isinstance(section, Mapping):
        raise ValueError(f"checkpoint config has no 'transformer' section (sections: {sorted(config)})")
    if gemma_hidden_size < 1 or gemma_num_hidden_states < 1:
        raise ValueError(
            f"Gemma sizes must be positive, got hidden size {gemma_hidden_size} "
            f"and {gemma_num_hidden_states} hidden states"
        )
    if section.get("use_embeddings_connector", True) is not True:
        raise _fail("use_embeddings_connector", section["use_embeddings_connector"], "true (every released model)")
    video_cfg, audio_cfg = connector_configs(section)
    if uses_v2_text_path(section):
        norm = section.get("text_encoder_norm_type", "per_token_rms")
        if norm != "per_token_rms":
            raise _fail("text_encoder_norm_type", norm, "'per_token_rms' on the LTX-2.3 text path")
        video_dim = _int(section, "num_attention_heads", 32) * _int(section, "attention_head_dim", 128)
        audio_dim = _int(section, "audio_num_attention_heads", 32) * _int(section, "audio_attention_head_dim", 64)
        extractor: FeatureExtractorV1 | FeatureExtractorV2 = FeatureExtractorV2(
            gemma_hidden_size, gemma_num_hidden_states, video_dim, audio_dim if with_audio else None
        )
        widths = {"video": (video_dim, video_cfg), "audio": (audio_dim, audio_cfg)}
    else:
        norm = section.get("text_encoder_norm_type")
        if norm == "per_token_rms":
            raise _fail("text_encoder_norm_type", norm, "the LTX-2 range normalisation (no LTX-2.3 text-path fields)")
        extractor = FeatureExtractorV1(gemma_hidden_size, gemma_num_hidden_states)
        widths = {"video": (gemma_hidden_size, video_cfg), "audio": (gemma_hidden_size, audio_cfg)}
    for name, (width, cfg) in widths.items():
        if (name == "audio" and not with_audio) or width == cfg.dim:
            continue
        prefix = "connector_" if name == "video" else "audio_connector_"
        # Usually a Gemma folder of another size than the one the checkpoint was trained with.
        raise CheckpointError(
            f"the text features do not fit the checkpoint: the {name} connector is {cfg.heads} heads x "
            f"{cfg.head_dim} = {cfg.dim} wide ({prefix}num_attention_heads x {prefix}attention_head_dim) but the "
            f"features are {width} wide (Gemma hidden size {gemma_hidden_size})"
        )
    return EmbeddingsProcessor(
        extractor, EmbeddingsConnector(video_cfg), EmbeddingsConnector(audio_cfg) if with_audio else None
    )


def text_embeddings_spec(
    gemma_hidden_size: int = GEMMA3_12B_HIDDEN_SIZE,
    gemma_num_hidden_states: int = GEMMA3_12B_NUM_HIDDEN_STATES,
    with_audio: bool = True,
) -> ComponentSpec:
    """Component spec of the text embeddings stage for a Gemma with these sizes (hidden states include
    the embedding output). `with_audio=False` builds the video-only stage and reads no audio keys."""

    def configurator(config: dict[str, Any]) -> EmbeddingsProcessor:
        return configure_embeddings_processor(config, gemma_hidden_size, gemma_num_hidden_states, with_audio)

    ops = TEXT_EMBEDDINGS_KEYS
    if not with_audio:
        ops = ops.dropping(contains="audio_embeddings_connector.").dropping(contains="audio_aggregate_embed.")
    return ComponentSpec(
        name="text embeddings" if with_audio else "video text embeddings",
        ops=ops.named(f"text_embeddings_{gemma_hidden_size}x{gemma_num_hidden_states}{'' if with_audio else '_video'}"),
        configurator=configurator,
        config_section="transformer",
        expected_kind="an LTX-2 / LTX-2.3 single-file checkpoint (text projection and embeddings connectors)",
        component=Component.TEXT_EMBEDDINGS,
    )


TEXT_EMBEDDINGS = text_embeddings_spec()
