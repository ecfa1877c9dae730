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

from ltx_core.loader.state_dict import piece_key

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


# -- whole checkpoint keys, per diffusers component folder ---------------------------------------

TRANSFORMER_PREFIX = "model.diffusion_model."
TEXT_PROJECTION_ROOT = "text_embedding_projection."
STAT_NAMES = {
    "latents_mean": "per_channel_statistics.mean-of-means",
    "latents_std": "per_channel_statistics.std-of-means",
}
_STAT_BACK = {v: k for k, v in STAT_NAMES.items()}

# Vocoder: reference segment -> diffusers segment (`downsample.lowpass.filter` is handled apart).
VOCODER_SEGMENTS: Mapping[str, str] = {
    "conv_pre": "conv_in",
    "conv_post": "conv_out",
    "ups": "upsamplers",
    "resblocks": "resnets",
    "act_post": "act_out",
}
_VOCODER_BACK = _inverse(VOCODER_SEGMENTS)


def transformer_key_to_reference(key: str) -> str:
    return TRANSFORMER_PREFIX + transformer_from_diffusers(key)


def transformer_key_to_diffusers(key: str) -> str | None:
    """None for single-file keys that are not the transformer's (connectors, other components)."""
    if not key.startswith(TRANSFORMER_PREFIX):
        return None
    name = key[len(TRANSFORMER_PREFIX) :]
    if name.startswith(CONNECTOR_REFERENCE_ROOTS):
        return None
    return transformer_to_diffusers(name)


def connectors_key_to_reference(key: str) -> str:
    name = connectors_from_diffusers(key)
    return name if name.startswith(TEXT_PROJECTION_ROOT) else TRANSFORMER_PREFIX + name


def connectors_key_to_diffusers(key: str) -> str | None:
    if key.startswith(TEXT_PROJECTION_ROOT):
        return connectors_to_diffusers(key)
    if key.startswith(TRANSFORMER_PREFIX) and key[len(TRANSFORMER_PREFIX) :].startswith(CONNECTOR_REFERENCE_ROOTS):
        return connectors_to_diffusers(key[len(TRANSFORMER_PREFIX) :])
    return None


def _longest_prefix(key: str, pairs: list[tuple[str, str]]) -> str | None:
    best: tuple[str, str] | None = None
    for old, new in pairs:
        if key.startswith(old) and (best is None or len(old) > len(best[0])):
            best = (old, new)
    return None if best is None else best[1] + key[len(best[0]) :]


def video_vae_key_to_reference(key: str, block_pairs: list[tuple[str, str]]) -> str:
    """`block_pairs`: (reference prefix, diffusers prefix) from `vae_block_renames`."""
    if key in STAT_NAMES:
        return "vae." + STAT_NAMES[key]
    back = [(d, r) for r, d in block_pairs]
    name = _longest_prefix(key, back) or key
    name = name.replace(".resnets.", ".res_blocks.")
    for diffusers_name, reference in (("decoder.time_embedder.", "decoder.last_time_embedder."),
                                      ("decoder.scale_shift_table", "decoder.last_scale_shift_table")):  # fmt: skip
        if name.startswith(diffusers_name):
            name = reference + name[len(diffusers_name) :]
    return "vae." + name


_VAE_DROPPED_STATS = ("channel", "mean-of-stds", "mean-of-stds_over_std-of-means")


def video_vae_key_to_diffusers(key: str, block_pairs: list[tuple[str, str]]) -> str | None:
    """None for keys outside the video VAE and for the statistics diffusers does not keep."""
    if not key.startswith("vae."):
        return None
    name = key[len("vae.") :]
    if name in _STAT_BACK:
        return _STAT_BACK[name]
    if name.startswith("per_channel_statistics."):
        return None
    for reference, diffusers_name in (("decoder.last_time_embedder.", "decoder.time_embedder."),
                                      ("decoder.last_scale_shift_table", "decoder.scale_shift_table")):  # fmt: skip
        if name.startswith(reference):
            name = diffusers_name + name[len(reference) :]
    name = name.replace(".res_blocks.", ".resnets.")
    mapped = _longest_prefix(name, [(r, d) for r, d in block_pairs])
    return mapped if mapped is not None else name


def audio_vae_key_to_reference(key: str) -> str:
    return "audio_vae." + STAT_NAMES.get(key, key)


def audio_vae_key_to_diffusers(key: str) -> str | None:
    if not key.startswith("audio_vae."):
        return None
    name = key[len("audio_vae.") :]
    if name.startswith("per_channel_statistics."):
        return _STAT_BACK.get(name)
    return name


def vocoder_key_to_reference(key: str) -> str:
    name = _rename_segments(key, _VOCODER_BACK).replace(".downsample.filter", ".downsample.lowpass.filter")
    return "vocoder." + name


def vocoder_key_to_diffusers(key: str) -> str | None:
    if not key.startswith("vocoder."):
        return None
    name = key[len("vocoder.") :].replace(".downsample.lowpass.filter", ".downsample.filter")
    return _rename_segments(name, VOCODER_SEGMENTS)


# -- LTX-2.5 folders: the duration head and the diffusion decoder ----------------------------------
# diffusers splits the fused q/k/v projection of both into three Linears; each is read back as one
# piece of the fused tensor (thirds along dim 0, in q, k, v order).
_QKV_PIECES = {"to_q": 0, "to_k": 1, "to_v": 2}
VIDEO_VAE_ROOT = "vae."
DURATION_HEAD_ROOT = "duration_head."
_POOLER = "attention_pooler."


def duration_head_key_to_reference(key: str) -> str:
    """diffusers `LTX2DurationHead` key -> the duration-head file's (`duration_head.*`)."""
    if key.startswith(_POOLER):
        module, _, leaf = key[len(_POOLER) :].partition(".")
        if module in _QKV_PIECES:
            return piece_key(f"{DURATION_HEAD_ROOT}{_POOLER}cross_attn.in_proj_{leaf}", _QKV_PIECES[module], 3)
        if module == "to_out":
            return f"{DURATION_HEAD_ROOT}{_POOLER}cross_attn.out_proj.{leaf}"
    return DURATION_HEAD_ROOT + key


# Diffusion decoder: diffusers segment path -> the reference's (both under `decoder.`).
_DIFFUSION_DECODER_RENAMES = (
    (".attn.to_out.0.", ".attn.proj."),
    (".attn.norm_q.", ".attn.q_norm."),
    (".attn.norm_k.", ".attn.k_norm."),
    ("t_embedder.timestep_embedder.linear_1.", "t_embedder.mlp.0."),
    ("t_embedder.timestep_embedder.linear_2.", "t_embedder.mlp.2."),
)


def diffusion_decoder_key_to_reference(key: str) -> str:
    """diffusers `LTX2VideoDiffusionDecoderModel` key -> the LTX-2.5 video VAE file's (`vae.decoder.*`,
    `vae.per_channel_statistics.*`). Its static gates arrive folded into the Linears they scale, as the
    reference loader folds them (so nothing is left to fold)."""
    if key in STAT_NAMES:
        return VIDEO_VAE_ROOT + STAT_NAMES[key]
    for old, new in _DIFFUSION_DECODER_RENAMES:
        key = key.replace(old, new)
    head, sep, leaf = key.rpartition(".")
    module_path, _, module = head.rpartition(".")
    if sep and module in _QKV_PIECES and module_path.endswith(".attn"):
        return piece_key(f"{VIDEO_VAE_ROOT}{module_path}.qkv.{leaf}", _QKV_PIECES[module], 3)
    return VIDEO_VAE_ROOT + key
