"""Module names in diffusers' LTX-2 classes versus the reference's single file.

diffusers' converter (`scripts/convert_ltx2_to_diffusers.py`) renames a few path segments of the
transformer and the text connectors; everything else keeps its name. The renames here work on whole
dot-separated segments, so each table is a bijection and reversible: a name read from a diffusers file
maps back to exactly one reference name (a substring rule such as `adaln_single -> time_embed` would
also hit `av_ca_video_scale_shift_adaln_single`).

Names on both sides are relative to the component: reference transformer names come after
`model.diffusion_model.` (the ComfyUI LoRA prefix `diffusion_model.` strips to the same names), diffusers
names after the component folder (`transformer/`) or the LoRA prefix `transformer.`.
"""

from __future__ import annotations

from collections.abc import Mapping

# Reference segment -> diffusers segment, for the transformer (LTX2VideoTransformer3DModel).
TRANSFORMER_SEGMENTS: Mapping[str, str] = {
    "patchify_proj": "proj_in",
    "audio_patchify_proj": "audio_proj_in",
    "adaln_single": "time_embed",
    "audio_adaln_single": "audio_time_embed",
    "prompt_adaln_single": "prompt_adaln",
    "audio_prompt_adaln_single": "audio_prompt_adaln",
    "av_ca_video_scale_shift_adaln_single": "av_cross_attn_video_scale_shift",
    "av_ca_a2v_gate_adaln_single": "av_cross_attn_video_a2v_gate",
    "av_ca_audio_scale_shift_adaln_single": "av_cross_attn_audio_scale_shift",
    "av_ca_v2a_gate_adaln_single": "av_cross_attn_audio_v2a_gate",
    "scale_shift_table_a2v_ca_video": "video_a2v_cross_attn_scale_shift_table",
    "scale_shift_table_a2v_ca_audio": "audio_a2v_cross_attn_scale_shift_table",
    "q_norm": "norm_q",
    "k_norm": "norm_k",
}

# Reference segment -> diffusers segment, for the text connectors (LTX2TextConnectors), whose reference
# names sit inside the transformer's namespace (`video_embeddings_connector.*`) or at the file's top level
# (`text_embedding_projection.*`).
CONNECTOR_SEGMENTS: Mapping[str, str] = {
    "video_embeddings_connector": "video_connector",
    "audio_embeddings_connector": "audio_connector",
    "transformer_1d_blocks": "transformer_blocks",
    "q_norm": "norm_q",
    "k_norm": "norm_k",
}

# Reference projection module -> diffusers connectors module (2.3 per-modality; 2.0 one projection).
TEXT_PROJECTION_MODULES: Mapping[str, str] = {
    "text_embedding_projection.video_aggregate_embed": "video_text_proj_in",
    "text_embedding_projection.audio_aggregate_embed": "audio_text_proj_in",
    "text_embedding_projection.aggregate_embed": "text_proj_in",
}

CONNECTOR_REFERENCE_ROOTS = ("video_embeddings_connector.", "audio_embeddings_connector.")


def _rename_segments(name: str, table: Mapping[str, str]) -> str:
    return ".".join(table.get(segment, segment) for segment in name.split("."))


def _inverse(table: Mapping[str, str]) -> dict[str, str]:
    return {v: k for k, v in table.items()}


_TRANSFORMER_BACK = _inverse(TRANSFORMER_SEGMENTS)
_CONNECTOR_BACK = _inverse(CONNECTOR_SEGMENTS)
_PROJECTION_BACK = _inverse(TEXT_PROJECTION_MODULES)


def transformer_to_diffusers(name: str) -> str:
    return _rename_segments(name, TRANSFORMER_SEGMENTS)


def transformer_from_diffusers(name: str) -> str:
    return _rename_segments(name, _TRANSFORMER_BACK)


def _replace_root(name: str, table: Mapping[str, str]) -> str | None:
    for old, new in table.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


def connectors_to_diffusers(name: str) -> str:
    """A reference connector/projection name (`video_embeddings_connector.*`, `text_embedding_projection.*`)
    as diffusers' LTX2TextConnectors names it."""
    projected = _replace_root(name, TEXT_PROJECTION_MODULES)
    return projected if projected is not None else _rename_segments(name, CONNECTOR_SEGMENTS)


def connectors_from_diffusers(name: str) -> str:
    projected = _replace_root(name, _PROJECTION_BACK)
    return projected if projected is not None else _rename_segments(name, _CONNECTOR_BACK)
