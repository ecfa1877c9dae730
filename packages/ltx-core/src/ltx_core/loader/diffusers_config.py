"""Component configs: diffusers' `config.json` of each folder versus the reference's `config` metadata.

The reference's single file describes every component in one `config` object (sections `transformer`,
`vae`, `audio_vae`, `vocoder`; upsampler files a flat object). diffusers keeps one `config.json` per
component folder with its own names. These functions translate both ways for LTX-2 (19B, "2.0") and
LTX-2.3 (`LTX2VideoTransformer3DModel`, `LTX2TextConnectors`, `AutoencoderKLLTX2Video`,
`AutoencoderKLLTX2Audio`, `LTX2Vocoder` (2.0) / `LTX2VocoderWithBWE` (2.3), `LTX2LatentUpsamplerModel`);
anything the reference's models cannot express is refused naming the field. A key a config.json lacks
is read as diffusers' own default for it (`DIFFUSERS_DEFAULTS`), as diffusers reads it.

Where the two disagree we follow the reference (see docs/interop.md): the transformer and the text
connectors share the reference's `transformer` section; `perturbed_attn` (diffusers' STG switch) is written
as the 2.3 converter does and ignored when read (STG is a pipeline choice here); diffusers'
`use_cross_timestep` modelling of the cross-modal gate is not a config field we read.

Video VAE blocks: the reference lists encoder / decoder blocks (`res_x`, `compress_*` with a channel
multiplier); diffusers groups them into down / up blocks of (resnets, one resampler) plus a mid block.
`vae_block_layout` walks the reference list and gives, per reference block, the diffusers module it
becomes; the converter's positional rule, which reproduces its static LTX-2.3 table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltx_core.loader.errors import CheckpointError

# The diffusers release whose LTX-2 layout these configs follow (written into `_diffusers_version`).
DIFFUSERS_VERSION = "0.40.0.dev0"

TRANSFORMER_CLASS = "LTX2VideoTransformer3DModel"
CONNECTORS_CLASS = "LTX2TextConnectors"
VIDEO_VAE_CLASS = "AutoencoderKLLTX2Video"
AUDIO_VAE_CLASS = "AutoencoderKLLTX2Audio"
VOCODER_CLASS = "LTX2VocoderWithBWE"
UPSAMPLER_CLASS = "LTX2LatentUpsamplerModel"

_AXIS_TO_DIFFUSERS = {"space": "spatial", "time": "temporal", "all": "spatiotemporal"}
_AXIS_FROM_DIFFUSERS = {v: k for k, v in _AXIS_TO_DIFFUSERS.items()}
_SPATIAL_FACTOR = {"space": 2, "time": 1, "all": 2}
_TEMPORAL_FACTOR = {"space": 1, "time": 2, "all": 2}


def _require(config: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in config:
        raise CheckpointError(f"{where}: config.json has no {key!r}")
    return config[key]


# diffusers' own defaults (the `__init__` defaults of its LTX-2 classes, diffusers 0.42.1): a config.json
# without a key means this value to diffusers, so it means the same here. The first diffusers release of
# LTX-2 saved configs without the keys later releases added (`audio_connector_*`, ...).
DIFFUSERS_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "LTX2VideoTransformer3DModel": {
        "in_channels": 128, "out_channels": 128, "patch_size": 1, "patch_size_t": 1, "num_attention_heads": 32,
        "attention_head_dim": 128, "cross_attention_dim": 4096, "pos_embed_max_pos": 20, "base_height": 2048,
        "base_width": 2048, "gated_attn": False, "cross_attn_mod": False, "audio_in_channels": 128,
        "audio_out_channels": 128, "audio_patch_size": 1, "audio_patch_size_t": 1, "audio_num_attention_heads": 32,
        "audio_attention_head_dim": 64, "audio_cross_attention_dim": 2048, "audio_pos_embed_max_pos": 20,
        "audio_gated_attn": False, "audio_cross_attn_mod": False, "num_layers": 48,
        "activation_fn": "gelu-approximate", "qk_norm": "rms_norm_across_heads", "norm_elementwise_affine": False,
        "norm_eps": 1e-6,
        "caption_channels": 3840, "attention_bias": True, "rope_theta": 10000.0, "rope_double_precision": True,
        "causal_offset": 1, "timestep_scale_multiplier": 1000, "cross_attn_timestep_scale_multiplier": 1000,
        "rope_type": "interleaved", "use_prompt_embeddings": True, "ff_bias": True, "audio_ff_bias": True,
        "use_prompt_adaln_single": True, "use_keyframes_abs_pos_embedding": False,
    },
    "LTX2TextConnectors": {
        "caption_channels": 3840, "text_proj_in_factor": 49, "video_connector_num_attention_heads": 30,
        "video_connector_attention_head_dim": 128, "video_connector_num_layers": 2,
        "video_connector_num_learnable_registers": 128, "video_gated_attn": False,
        "audio_connector_num_attention_heads": 30, "audio_connector_attention_head_dim": 128,
        "audio_connector_num_layers": 2, "audio_connector_num_learnable_registers": 128, "audio_gated_attn": False,
        "connector_rope_base_seq_len": 4096, "rope_theta": 10000.0, "rope_double_precision": True,
        "causal_temporal_positioning": False, "rope_type": "interleaved", "per_modality_projections": False,
        "video_hidden_dim": 4096, "audio_hidden_dim": 2048, "proj_bias": False,
    },
    "AutoencoderKLLTX2Video": {
        "in_channels": 3, "out_channels": 3, "latent_channels": 128, "block_out_channels": [256, 512, 1024, 2048],
        "decoder_block_out_channels": [256, 512, 1024], "layers_per_block": [4, 6, 6, 2, 2],
        "decoder_layers_per_block": [5, 5, 5, 5], "decoder_inject_noise": [False, False, False, False],
        "downsample_type": ["spatial", "temporal", "spatiotemporal", "spatiotemporal"],
        "upsample_type": ["spatiotemporal", "spatiotemporal", "spatiotemporal"],
        "upsample_residual": [True, True, True], "upsample_factor": [2, 2, 2], "timestep_conditioning": False,
        "patch_size": 4, "patch_size_t": 1, "encoder_causal": True, "decoder_causal": True,
        "encoder_spatial_padding_mode": "zeros", "decoder_spatial_padding_mode": "reflect",
    },
    "AutoencoderKLLTX2Audio": {
        "base_channels": 128, "output_channels": 2, "ch_mult": [1, 2, 4], "num_res_blocks": 2,
        "attn_resolutions": None, "in_channels": 2, "resolution": 256, "latent_channels": 8, "norm_type": "pixel",
        "causality_axis": "height", "dropout": 0.0, "mid_block_add_attention": False, "sample_rate": 16000,
        "mel_hop_length": 160, "is_causal": True, "mel_bins": 64, "double_z": True,
    },
    "LTX2Vocoder": {
        "in_channels": 128, "hidden_channels": 1024, "out_channels": 2, "upsample_kernel_sizes": [16, 15, 8, 4, 4],
        "upsample_factors": [6, 5, 2, 2, 2], "resnet_kernel_sizes": [3, 7, 11],
        "resnet_dilations": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "act_fn": "leaky_relu",
        "leaky_relu_negative_slope": 0.1, "antialias": False, "antialias_ratio": 2, "antialias_kernel_size": 12,
        "final_act_fn": "tanh", "final_bias": True, "output_sampling_rate": 24000,
    },
    "LTX2VocoderWithBWE": {
        "in_channels": 128, "hidden_channels": 1536, "out_channels": 2,
        "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4], "upsample_factors": [5, 2, 2, 2, 2, 2],
        "resnet_kernel_sizes": [3, 7, 11], "resnet_dilations": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "act_fn": "snakebeta", "leaky_relu_negative_slope": 0.1, "antialias": True, "antialias_ratio": 2,
        "antialias_kernel_size": 12, "final_act_fn": None, "final_bias": False, "bwe_in_channels": 128,
        "bwe_hidden_channels": 512, "bwe_out_channels": 2, "bwe_upsample_kernel_sizes": [12, 11, 4, 4, 4],
        "bwe_upsample_factors": [6, 5, 2, 2, 2], "bwe_resnet_kernel_sizes": [3, 7, 11],
        "bwe_resnet_dilations": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "bwe_act_fn": "snakebeta",
        "bwe_leaky_relu_negative_slope": 0.1, "bwe_antialias": True, "bwe_antialias_ratio": 2,
        "bwe_antialias_kernel_size": 12, "bwe_final_act_fn": None, "bwe_final_bias": False, "filter_length": 512,
        "hop_length": 80, "window_length": 512, "num_mel_channels": 64, "input_sampling_rate": 16000,
        "output_sampling_rate": 48000,
    },
    "LTX2LatentUpsamplerModel": {
        "in_channels": 128, "mid_channels": 1024, "num_blocks_per_stage": 4, "dims": 3, "spatial_upsample": True,
        "temporal_upsample": False, "rational_spatial_scale": 2.0, "use_rational_resampler": True,
    },
}  # fmt: skip


class _Config:
    """A component's config.json read the way diffusers reads it: an absent key is the class default."""

    def __init__(self, config: Mapping[str, Any], class_name: str) -> None:
        self._config, self._defaults = config, DIFFUSERS_DEFAULTS[class_name]

    def __getitem__(self, key: str) -> Any:
        return self._config[key] if key in self._config else self._defaults[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._config.get(key, self._defaults.get(key, default))


def _stamp(class_name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A diffusers ConfigMixin JSON object: class, version, then the init kwargs sorted by name."""
    return {"_class_name": class_name, "_diffusers_version": DIFFUSERS_VERSION, **dict(sorted(fields.items()))}


def _check_class(config: Mapping[str, Any], expected: str, where: str) -> None:
    found = config.get("_class_name")
    if found != expected:
        raise CheckpointError(f"{where}: config.json _class_name is {found!r}; expected {expected!r} (LTX-2 diffusers)")


# -- transformer + text connectors ---------------------------------------------------------------


def _uses_v2_text_path(transformer: Mapping[str, Any]) -> bool:
    return bool(transformer.get("caption_proj_before_connector", False))


def transformer_to_diffusers(
    config: Mapping[str, Any], *, vae_scale: tuple[int, int, int], audio_hop_length: int, audio_sampling_rate: int
) -> dict[str, Any]:
    """diffusers' transformer config.json from the reference's `transformer` section."""
    t = config
    max_pos = list(t.get("positional_embedding_max_pos", [20, 2048, 2048]))
    v2 = _uses_v2_text_path(t)
    gated = bool(t.get("apply_gated_attention", False))
    adaln = bool(t.get("cross_attention_adaln", False))
    fields = {
        "activation_fn": t.get("activation_fn", "gelu-approximate"),
        "attention_bias": bool(t.get("attention_bias", True)),
        "attention_head_dim": t["attention_head_dim"],
        "attention_out_bias": True,
        "audio_attention_head_dim": t["audio_attention_head_dim"],
        "audio_cross_attention_dim": t["audio_cross_attention_dim"],
        "audio_cross_attn_mod": adaln,
        "audio_ff_bias": bool(t.get("audio_ff_bias", True)),
        "audio_gated_attn": gated,
        "audio_hop_length": audio_hop_length,
        "audio_in_channels": t["audio_in_channels"],
        "audio_num_attention_heads": t["audio_num_attention_heads"],
        "audio_out_channels": t["audio_out_channels"],
        "audio_patch_size": 1,
        "audio_patch_size_t": 1,
        "audio_pos_embed_max_pos": t.get("audio_positional_embedding_max_pos", [20])[0],
        "audio_sampling_rate": audio_sampling_rate,
        # Mel frames per audio latent: fixed by the audio VAE's architecture in every LTX-2 release.
        "audio_scale_factor": 4,
        "base_height": max_pos[1],
        "base_width": max_pos[2],
        "caption_channels": t["caption_channels"],
        "causal_offset": 1 if t.get("causal_temporal_positioning", False) else 0,
        "cross_attention_dim": t["cross_attention_dim"],
        "cross_attn_mod": adaln,
        "cross_attn_timestep_scale_multiplier": t.get("av_ca_timestep_scale_multiplier", 1),
        "ff_bias": bool(t.get("ff_bias", True)),
        "gated_attn": gated,
        "in_channels": t["in_channels"],
        "norm_elementwise_affine": bool(t.get("norm_elementwise_affine", False)),
        "norm_eps": t.get("norm_eps", 1e-6),
        "num_attention_heads": t["num_attention_heads"],
        "num_layers": t["num_layers"],
        "out_channels": t["out_channels"],
        "patch_size": 1,
        "patch_size_t": 1,
        # diffusers' STG switch: on for the 2.3 layout (as its converter writes), off for 2.0.
        "perturbed_attn": v2,
        "pos_embed_max_pos": max_pos[0],
        "qk_norm": "rms_norm_across_heads",
        "rope_double_precision": t.get("frequencies_precision", "float32") == "float64",
        "rope_theta": t.get("positional_embedding_theta", 10000.0),
        "rope_type": t.get("rope_type", "split"),
        "timestep_scale_multiplier": t.get("timestep_scale_multiplier", 1000),
        "use_keyframes_abs_pos_embedding": bool(t.get("use_keyframes_abs_pos_embedding", False)),
        "use_prompt_adaln_single": bool(t.get("use_prompt_adaln_single", True)),
        "use_prompt_embeddings": not v2,
        "vae_scale_factors": list(vae_scale),
    }
    return _stamp(TRANSFORMER_CLASS, fields)


def connectors_to_diffusers(
    config: Mapping[str, Any], *, text_proj_in_factor: int, proj_bias: bool = True
) -> dict[str, Any]:
    """diffusers' connectors config.json from the reference's `transformer` section.

    `text_proj_in_factor`: the text projection's input width over `caption_channels` (from its weight);
    `proj_bias`: whether the projection has a bias (LTX-2.3's do, LTX-2.0's does not)."""
    t = config
    v2 = _uses_v2_text_path(t)
    gated = bool(t.get("connector_apply_gated_attention", False))
    layers = t.get("connector_num_layers", 2)
    registers = t.get("connector_num_learnable_registers", 128)
    fields = {
        "audio_connector_attention_head_dim": t["audio_connector_attention_head_dim"],
        "audio_connector_num_attention_heads": t["audio_connector_num_attention_heads"],
        "audio_connector_num_layers": layers,
        "audio_connector_num_learnable_registers": registers,
        "audio_gated_attn": gated,
        # Read only by the per-modality (2.3) projections; for 2.0 diffusers' converter keeps the defaults.
        "audio_hidden_dim": t["audio_num_attention_heads"] * t["audio_attention_head_dim"] if v2 else 2048,
        "caption_channels": t["caption_channels"],
        "causal_temporal_positioning": False,
        "connector_rope_base_seq_len": t.get("connector_positional_embedding_max_pos", [4096])[0],
        "per_modality_projections": v2,
        "proj_bias": proj_bias,
        "rope_double_precision": t.get("frequencies_precision", "float32") == "float64",
        "rope_theta": t.get("positional_embedding_theta", 10000.0),
        "rope_type": t.get("rope_type", "split"),
        "text_proj_in_factor": text_proj_in_factor,
        "video_connector_attention_head_dim": t["connector_attention_head_dim"],
        "video_connector_num_attention_heads": t["connector_num_attention_heads"],
        "video_connector_num_layers": layers,
        "video_connector_num_learnable_registers": registers,
        "video_gated_attn": gated,
        "video_hidden_dim": t["num_attention_heads"] * t["attention_head_dim"] if v2 else 4096,
    }
    return _stamp(CONNECTORS_CLASS, fields)


@dataclass(frozen=True)
class _From:
    """A reference field copied from diffusers' transformer ("t") or connectors ("c") config, optionally converted."""

    config: str
    key: str
    convert: Callable[[Any], Any] | None = None

    def read(self, t: _Config, c: _Config) -> Any:
        value = (t if self.config == "t" else c)[self.key]
        return value if self.convert is None else self.convert(value)


# The reference's `transformer` section, in its key order: each field is a constant (the reference's fixed
# architecture fields, which diffusers' config has no counterpart for), a `_From` copy, or a function of
# both configs.
_TRANSFORMER_SECTION: Mapping[str, Any] = {
    "_class_name": "AVTransformer3DModel",
    "attention_type": "default",
    "cross_attention_norm": True,
    "double_self_attention": False,
    "dropout": 0.0,
    "num_embeds_ada_norm": 1000,
    "only_cross_attention": False,
    "share_ff": False,
    "standardization_norm": "rms_norm",
    "upcast_attention": False,
    "use_linear_projection": False,
    "use_middle_indices_grid": True,
    "activation_fn": _From("t", "activation_fn"),
    "attention_bias": _From("t", "attention_bias"),
    "norm_elementwise_affine": _From("t", "norm_elementwise_affine"),
    "norm_eps": _From("t", "norm_eps"),
    "positional_embedding_max_pos": lambda t, c: [t["pos_embed_max_pos"], t["base_height"], t["base_width"]],
    "positional_embedding_theta": _From("t", "rope_theta"),
    "positional_embedding_type": "rope",
    "qk_norm": "rms_norm",
    "timestep_scale_multiplier": _From("t", "timestep_scale_multiplier"),
    "use_audio_video_cross_attention": True,
    "av_cross_ada_norm": True,
    "audio_positional_embedding_max_pos": lambda t, c: [t["audio_pos_embed_max_pos"]],
    "connector_positional_embedding_max_pos": lambda t, c: [c["connector_rope_base_seq_len"]],
    "connector_num_learnable_registers": _From("c", "video_connector_num_learnable_registers"),
    "use_embeddings_connector": True,
    "causal_temporal_positioning": _From("t", "causal_offset", bool),
    "in_channels": _From("t", "in_channels"),
    "out_channels": _From("t", "out_channels"),
    "audio_in_channels": _From("t", "audio_in_channels"),
    "audio_out_channels": _From("t", "audio_out_channels"),
    "num_layers": _From("t", "num_layers"),
    "num_attention_heads": _From("t", "num_attention_heads"),
    "attention_head_dim": _From("t", "attention_head_dim"),
    "cross_attention_dim": _From("t", "cross_attention_dim"),
    "audio_num_attention_heads": _From("t", "audio_num_attention_heads"),
    "audio_attention_head_dim": _From("t", "audio_attention_head_dim"),
    "audio_cross_attention_dim": _From("t", "audio_cross_attention_dim"),
    "apply_gated_attention": _From("t", "gated_attn", bool),
    "cross_attention_adaln": _From("t", "cross_attn_mod", bool),
    "av_ca_timestep_scale_multiplier": _From("t", "cross_attn_timestep_scale_multiplier"),
    "caption_channels": _From("c", "caption_channels"),
    "connector_apply_gated_attention": _From("c", "video_gated_attn", bool),
    "connector_num_layers": _From("c", "video_connector_num_layers"),
    "connector_num_attention_heads": _From("c", "video_connector_num_attention_heads"),
    "connector_attention_head_dim": _From("c", "video_connector_attention_head_dim"),
    "audio_connector_num_attention_heads": _From("c", "audio_connector_num_attention_heads"),
    "audio_connector_attention_head_dim": _From("c", "audio_connector_attention_head_dim"),
    "frequencies_precision": _From("t", "rope_double_precision", lambda double: "float64" if double else "float32"),
    "rope_type": _From("t", "rope_type"),
    "ff_bias": _From("t", "ff_bias", bool),
    "audio_ff_bias": _From("t", "audio_ff_bias", bool),
    "use_prompt_adaln_single": _From("t", "use_prompt_adaln_single", bool),
    "use_keyframes_abs_pos_embedding": _From("t", "use_keyframes_abs_pos_embedding", bool),
}
# The 2.3 text path (per-modality projections before the connectors) in the reference's terms.
_V2_TEXT_PATH_FIELDS: Mapping[str, Any] = {
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "text_encoder_norm_type": "per_token_rms",
}


def _check_transformer_pair(t: _Config, c: _Config, where: str) -> bool:
    """Refuse what the reference cannot express; returns whether the pair uses the 2.3 (per-modality) text path."""
    for key in ("patch_size", "patch_size_t", "audio_patch_size", "audio_patch_size_t"):
        if t[key] != 1:
            raise CheckpointError(f"{where}: {key}={t[key]!r} is not supported (the reference patchifies with 1)")
    if t["gated_attn"] != t["audio_gated_attn"] or t["cross_attn_mod"] != t["audio_cross_attn_mod"]:
        raise CheckpointError(f"{where}: video and audio streams with different gated_attn / cross_attn_mod")
    if (
        c["video_connector_num_layers"] != c["audio_connector_num_layers"]
        or c["video_gated_attn"] != c["audio_gated_attn"]
    ):
        raise CheckpointError("connectors: video and audio connectors with different depth or gating")
    if c["video_connector_num_learnable_registers"] != c["audio_connector_num_learnable_registers"]:
        raise CheckpointError("connectors: video and audio connectors with different learnable register counts")
    v2 = bool(c["per_modality_projections"])
    # The two text paths: 2.0 projects the caption inside the transformer (`use_prompt_embeddings`) after
    # one shared projection; 2.3 and later project per modality before the connectors, and not again.
    if bool(t["use_prompt_embeddings"]) == v2:
        raise CheckpointError(
            f"{where}: use_prompt_embeddings={t['use_prompt_embeddings']!r} with connectors "
            f"per_modality_projections={v2!r}; accepted: true/false (LTX-2.0) or false/true (LTX-2.3)"
        )
    if t["qk_norm"] != "rms_norm_across_heads":
        raise CheckpointError(f"{where}: qk_norm={t['qk_norm']!r}; accepted: 'rms_norm_across_heads'")
    return v2


def _field_value(spec: Any, t: _Config, c: _Config) -> Any:
    if isinstance(spec, _From):
        return spec.read(t, c)
    return spec(t, c) if callable(spec) else spec


def transformer_from_diffusers(transformer: Mapping[str, Any], connectors: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's `transformer` section (which also describes the text connectors); an absent key is
    diffusers' default for it."""
    _check_class(transformer, TRANSFORMER_CLASS, "transformer")
    _check_class(connectors, CONNECTORS_CLASS, "connectors")
    t, c = _Config(transformer, TRANSFORMER_CLASS), _Config(connectors, CONNECTORS_CLASS)
    v2 = _check_transformer_pair(t, c, "transformer")
    section = {key: _field_value(spec, t, c) for key, spec in _TRANSFORMER_SECTION.items()}
    if v2:
        section.update(_V2_TEXT_PATH_FIELDS)
    return section


# -- video VAE ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    kind: str  # "res_x" or "compress_<axis>[_res]"
    num_layers: int = 1
    multiplier: int = 1
    residual: bool = False

    @property
    def axis(self) -> str:
        return self.kind.split("_")[1]

    @classmethod
    def parse(cls, entry: Any, where: str) -> _Block:
        kind, params = entry
        params = {"num_layers": params} if isinstance(params, int) else dict(params or {})
        if kind != "res_x" and not kind.startswith("compress_"):
            raise CheckpointError(f"{where}: block {kind!r} has no diffusers equivalent (res_x, compress_* only)")
        if params.get("inject_noise"):
            raise CheckpointError(f"{where}: block {kind!r} with inject_noise has no equivalent here")
        return cls(
            kind=kind,
            num_layers=int(params.get("num_layers", 1)),
            multiplier=int(params.get("multiplier", 1)),
            residual=bool(params.get("residual", False)),
        )

    def entry(self) -> list[Any]:
        if self.kind == "res_x":
            return ["res_x", {"num_layers": self.num_layers}]
        params: dict[str, Any] = {"multiplier": self.multiplier}
        if self.residual:
            params["residual"] = True
        return [self.kind, params]


@dataclass(frozen=True)
class _Stage:
    """A diffusers down/up block: resnets (`layers`, from reference block `res_index`) and a resampler
    (reference block `resampler_index`, None for the mid block)."""

    layers: int
    res_index: int | None
    resampler: _Block | None
    resampler_index: int | None


def _stages(blocks: Sequence[_Block], *, resnets_first: bool, where: str) -> tuple[list[_Stage], _Stage]:
    """Group reference blocks (in build order) into diffusers stages plus the mid block.

    Encoder (`resnets_first`): res, down, res, down, ..., res -> stages (res, down) and a trailing mid.
    Decoder: res (mid), up, res, up, res, ... -> the leading mid and stages (up, res)."""
    stages: list[_Stage] = []
    mid: _Stage | None = None
    pending: tuple[int, int] | None = None  # (layers, index) of a res block not yet placed
    items = list(enumerate(blocks))
    if not resnets_first:
        if items and items[0][1].kind == "res_x":
            index, block = items.pop(0)
            mid = _Stage(block.num_layers, index, None, None)
        else:
            mid = _Stage(0, None, None, None)
        i = 0
        while i < len(items):
            index, block = items[i]
            if block.kind == "res_x":
                raise CheckpointError(f"{where}: two res_x blocks in a row cannot be expressed in diffusers' layout")
            res = items[i + 1] if i + 1 < len(items) and items[i + 1][1].kind == "res_x" else None
            stages.append(_Stage(res[1].num_layers if res else 0, res[0] if res else None, block, index))
            i += 2 if res else 1
        return stages, mid
    for index, block in items:
        if block.kind == "res_x":
            if pending is not None:
                raise CheckpointError(f"{where}: two res_x blocks in a row cannot be expressed in diffusers' layout")
            pending = (block.num_layers, index)
        else:
            layers, res_index = pending if pending is not None else (0, None)
            stages.append(_Stage(layers, res_index, block, index))
            pending = None
    layers, res_index = pending if pending is not None else (0, None)
    return stages, _Stage(layers, res_index, None, None)


def vae_block_renames(vae: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(reference prefix, diffusers prefix) for every block of the reference's encoder and decoder, e.g.
    `encoder.down_blocks.1.` -> `encoder.down_blocks.0.downsamplers.0.`, `decoder.up_blocks.0.` ->
    `decoder.mid_block.`; res stacks map their `res_blocks.` to `resnets.`."""
    enc = [_Block.parse(b, "vae encoder_blocks") for b in vae.get("encoder_blocks", ())]
    dec = [_Block.parse(b, "vae decoder_blocks") for b in vae.get("decoder_blocks", ())]
    pairs: list[tuple[str, str]] = []
    stages, mid = _stages(enc, resnets_first=True, where="vae encoder_blocks")
    for i, stage in enumerate(stages):
        if stage.res_index is not None:
            pairs.append((f"encoder.down_blocks.{stage.res_index}.", f"encoder.down_blocks.{i}."))
        pairs.append((f"encoder.down_blocks.{stage.resampler_index}.", f"encoder.down_blocks.{i}.downsamplers.0."))
    if mid.res_index is not None:
        pairs.append((f"encoder.down_blocks.{mid.res_index}.", "encoder.mid_block."))
    # The decoder is built from its list in reverse; checkpoint indices follow the build order.
    stages, mid = _stages(list(reversed(dec)), resnets_first=False, where="vae decoder_blocks")
    if mid.res_index is not None:
        pairs.append((f"decoder.up_blocks.{mid.res_index}.", "decoder.mid_block."))
    for j, stage in enumerate(stages):
        pairs.append((f"decoder.up_blocks.{stage.resampler_index}.", f"decoder.up_blocks.{j}.upsamplers.0."))
        if stage.res_index is not None:
            pairs.append((f"decoder.up_blocks.{stage.res_index}.", f"decoder.up_blocks.{j}."))
    return pairs


def vae_scale_factors(vae: Mapping[str, Any]) -> tuple[int, int, int]:
    """(time, height, width) pixels per latent cell of the encoder."""
    blocks = [_Block.parse(b, "vae encoder_blocks") for b in vae.get("encoder_blocks", ())]
    compress = [b for b in blocks if b.kind != "res_x"]
    space = int(vae.get("patch_size", 4)) * math.prod(_SPATIAL_FACTOR[b.axis] for b in compress)
    time = math.prod(_TEMPORAL_FACTOR[b.axis] for b in compress)
    return (time, space, space)


def _padding_fields(encoder: str, decoder: str) -> dict[str, str]:
    """The reference's `vae` padding entries for diffusers' encoder / decoder padding modes.

    The reference reads one `spatial_padding_mode` for both halves; without it, the encoder pads with
    `encoder_spatial_padding_mode` (default zeros) and the decoder reflects (the LTX-2.0 file's layout,
    `VideoVAEConfig.from_checkpoint_config`). A reflecting decoder beside another encoder mode is that
    second form; any other pair has no reference config."""
    if encoder == decoder:
        return {"spatial_padding_mode": encoder}
    if decoder == "reflect":
        return {"encoder_spatial_padding_mode": encoder}
    raise CheckpointError(
        f"vae: encoder_spatial_padding_mode={encoder!r} with decoder_spatial_padding_mode={decoder!r} has no "
        "reference config (accepted: equal modes, or any encoder mode with a 'reflect' decoder)"
    )


def video_vae_to_diffusers(vae: Mapping[str, Any]) -> dict[str, Any]:
    """diffusers' vae config.json from the reference's `vae` section (convolutional decoder)."""
    if vae.get("norm_layer", "pixel_norm") != "pixel_norm":
        raise CheckpointError(f"vae norm_layer {vae['norm_layer']!r}: diffusers' LTX-2 VAE has only pixel_norm")
    enc = [_Block.parse(b, "vae encoder_blocks") for b in vae.get("encoder_blocks", ())]
    dec = [_Block.parse(b, "vae decoder_blocks") for b in vae.get("decoder_blocks", ())]
    latent = int(vae.get("latent_channels", 128))
    down, mid = _stages(enc, resnets_first=True, where="vae encoder_blocks")
    channels, block_out = latent, []
    for stage in down:
        assert stage.resampler is not None
        channels *= stage.resampler.multiplier
        block_out.append(channels)
    up, dmid = _stages(list(reversed(dec)), resnets_first=False, where="vae decoder_blocks")
    multipliers = [s.resampler.multiplier for s in up if s.resampler is not None]
    channels = int(vae.get("decoder_base_channels", 128)) * math.prod(multipliers)
    up_in = []
    for m in multipliers:
        up_in.append(channels)
        channels //= m
    from ltx_core.model.video_vae.config import VideoVAEConfig

    # The padding modes this file is encoded / decoded with, read by the same rule as the model's.
    ours = VideoVAEConfig.from_checkpoint_config(vae)
    time, space, _ = vae_scale_factors(vae)
    fields = {
        "block_out_channels": block_out,
        "decoder_block_out_channels": list(reversed(up_in)),
        "decoder_causal": ours.causal_decoder,
        "decoder_inject_noise": [False] * (len(up) + 1),
        # diffusers stores the decoder's per-stage lists in the reference's (not the build) order,
        # except upsample_type, which follows the build order.
        "decoder_layers_per_block": list(reversed([dmid.layers] + [s.layers for s in up])),
        "decoder_spatial_padding_mode": ours.decoder_padding,
        "decoder_spatio_temporal_scaling": [True] * len(up),
        "down_block_types": ["LTX2VideoDownBlock3D"] * len(down),
        "downsample_type": [_AXIS_TO_DIFFUSERS[s.resampler.axis] for s in down if s.resampler],
        "encoder_causal": True,
        "encoder_spatial_padding_mode": ours.encoder_padding,
        "in_channels": int(vae.get("in_channels", 3)),
        "latent_channels": latent,
        "layers_per_block": [s.layers for s in down] + [mid.layers],
        "out_channels": int(vae.get("out_channels", 3)),
        "patch_size": int(vae.get("patch_size", 4)),
        "patch_size_t": 1,
        "resnet_norm_eps": 1e-6,
        "scaling_factor": 1.0,
        "spatial_compression_ratio": space,
        "spatio_temporal_scaling": [True] * len(down),
        "temporal_compression_ratio": time,
        "timestep_conditioning": ours.timestep_conditioning,
        "upsample_factor": list(reversed(multipliers)),
        "upsample_residual": list(reversed([bool(s.resampler and s.resampler.residual) for s in up])),
        "upsample_type": [_AXIS_TO_DIFFUSERS[s.resampler.axis] for s in up if s.resampler],
    }
    return _stamp(VIDEO_VAE_CLASS, fields)


def _encoder_blocks_from_diffusers(c: _Config, where: str) -> list[list[Any]]:
    """The reference's `encoder_blocks`: per down block its resnets (if any) then a residual compress block
    whose multiplier is the channel growth; the last `layers_per_block` entry is the mid block."""
    latent = int(c["latent_channels"])
    layers = list(c["layers_per_block"])
    down_types = list(c["downsample_type"])
    block_out = list(c["block_out_channels"])
    if not (len(down_types) == len(block_out) == len(layers) - 1):
        raise CheckpointError(f"{where}: layers_per_block / downsample_type / block_out_channels lengths disagree")
    encoder: list[list[Any]] = []
    channels = latent
    for i, axis in enumerate(down_types):
        if layers[i]:
            encoder.append(_Block("res_x", num_layers=layers[i]).entry())
        if axis not in _AXIS_FROM_DIFFUSERS:
            raise CheckpointError(f"{where}: downsample_type {axis!r}; accepted: {sorted(_AXIS_FROM_DIFFUSERS)}")
        multiplier, rest = divmod(block_out[i], channels)
        if rest or multiplier < 1:
            raise CheckpointError(f"{where}: block_out_channels {block_out} are not multiples from {latent}")
        kind = f"compress_{_AXIS_FROM_DIFFUSERS[axis]}_res"
        encoder.append(_Block(kind, multiplier=multiplier).entry())
        channels = block_out[i]
    if layers[-1]:
        encoder.append(_Block("res_x", num_layers=layers[-1]).entry())
    return encoder


def _decoder_blocks_from_diffusers(c: _Config, where: str) -> tuple[list[list[Any]], int]:
    """The reference's `decoder_blocks` (listed in reverse of build order) and its `decoder_base_channels`."""
    up_types = list(c["upsample_type"])
    factors = list(reversed(c["upsample_factor"]))  # build order
    residual = list(reversed(c["upsample_residual"]))
    dec_layers = list(reversed(c["decoder_layers_per_block"]))  # build order: mid first
    up_in = list(reversed(c["decoder_block_out_channels"]))
    if not (len(up_types) == len(factors) == len(residual) == len(up_in) == len(dec_layers) - 1):
        raise CheckpointError(f"{where}: decoder list lengths disagree")
    built: list[list[Any]] = []
    if dec_layers[0]:
        built.append(_Block("res_x", num_layers=dec_layers[0]).entry())
    for j, axis in enumerate(up_types):
        if axis not in _AXIS_FROM_DIFFUSERS:
            raise CheckpointError(f"{where}: upsample_type {axis!r}; accepted: {sorted(_AXIS_FROM_DIFFUSERS)}")
        built.append(
            _Block(f"compress_{_AXIS_FROM_DIFFUSERS[axis]}", multiplier=factors[j], residual=residual[j]).entry()
        )
        if dec_layers[j + 1]:
            built.append(_Block("res_x", num_layers=dec_layers[j + 1]).entry())
    base, rest = divmod(up_in[-1], factors[-1])
    if rest:
        raise CheckpointError(f"{where}: decoder_block_out_channels {up_in} do not divide by upsample_factor")
    return list(reversed(built)), base


def video_vae_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's `vae` section from diffusers' vae config.json."""
    where = "vae"
    _check_class(config, VIDEO_VAE_CLASS, where)
    c = _Config(config, VIDEO_VAE_CLASS)
    padding = _padding_fields(c["encoder_spatial_padding_mode"], c["decoder_spatial_padding_mode"])
    if any(c["decoder_inject_noise"]):
        raise CheckpointError(f"{where}: decoder_inject_noise is not supported by the reference's decoder")
    if c["patch_size_t"] != 1:
        raise CheckpointError(f"{where}: patch_size_t={c['patch_size_t']!r} is not supported (1 only)")
    encoder = _encoder_blocks_from_diffusers(c, where)
    decoder, base = _decoder_blocks_from_diffusers(c, where)
    return {
        "_class_name": "CausalVideoAutoencoder",
        "dims": 3,
        "in_channels": int(c["in_channels"]),
        "out_channels": int(c["out_channels"]),
        "latent_channels": int(c["latent_channels"]),
        "patch_size": int(c["patch_size"]),
        "norm_layer": "pixel_norm",
        "latent_log_var": "uniform",
        **padding,
        "timestep_conditioning": bool(c["timestep_conditioning"]),
        "causal_decoder": bool(c["decoder_causal"]),
        "decoder_base_channels": base,
        "encoder_blocks": encoder,
        "decoder_blocks": decoder,
    }


# -- audio VAE and vocoder --------------------------------------------------------------------------


def audio_vae_to_diffusers(audio_vae: Mapping[str, Any]) -> dict[str, Any]:
    params = audio_vae["model"]["params"]
    dd = params["ddconfig"]
    stft = audio_vae.get("preprocessing", {}).get("stft", {})
    fields = {
        "attn_resolutions": list(dd["attn_resolutions"]) or None,
        "base_channels": dd["ch"],
        "causality_axis": dd.get("causality_axis", "height"),
        "ch_mult": list(dd["ch_mult"]),
        "double_z": bool(dd.get("double_z", True)),
        "dropout": dd.get("dropout", 0.0),
        "in_channels": dd["in_channels"],
        "is_causal": True,
        "latent_channels": dd["z_channels"],
        "mel_bins": dd["mel_bins"],
        "mel_hop_length": stft.get("hop_length", 160),
        "mid_block_add_attention": bool(dd.get("mid_block_add_attention", False)),
        "norm_type": dd.get("norm_type", "pixel"),
        "num_res_blocks": dd["num_res_blocks"],
        "output_channels": dd["out_ch"],
        "resolution": dd["resolution"],
        "sample_rate": params.get("sampling_rate", 16000),
    }
    return _stamp(AUDIO_VAE_CLASS, fields)


def audio_vae_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    where = "audio_vae"
    _check_class(config, AUDIO_VAE_CLASS, where)
    c = _Config(config, AUDIO_VAE_CLASS)
    if not c["is_causal"]:
        raise CheckpointError(f"{where}: is_causal=false is not supported (the reference's audio VAE is causal)")
    rate = c["sample_rate"]
    return {
        "model": {
            "params": {
                "ddconfig": {
                    "double_z": bool(c["double_z"]),
                    "mel_bins": c["mel_bins"],
                    "z_channels": c["latent_channels"],
                    "resolution": c["resolution"],
                    "downsample_time": False,
                    "in_channels": c["in_channels"],
                    "out_ch": c["output_channels"],
                    "ch": c["base_channels"],
                    "ch_mult": list(c["ch_mult"]),
                    "num_res_blocks": c["num_res_blocks"],
                    "attn_resolutions": list(c["attn_resolutions"] or []),
                    "dropout": c["dropout"],
                    "mid_block_add_attention": bool(c["mid_block_add_attention"]),
                    "norm_type": c["norm_type"],
                    "causality_axis": c["causality_axis"],
                },
                "sampling_rate": rate,
            }
        },
        "preprocessing": {"audio": {"sampling_rate": rate}, "stft": {"hop_length": c["mel_hop_length"]}},
    }


VOCODER_V1_CLASS = "LTX2Vocoder"
VOCODER_CLASSES = (VOCODER_CLASS, VOCODER_V1_CLASS)


def _final_act(apply: bool, tanh: bool) -> str | None:
    """diffusers' `final_act_fn` for a generator: the reference ends with tanh or a clamp to [-1, 1] when
    the final activation applies (diffusers' None would leave the output unclamped)."""
    if not apply:
        return None
    return "tanh" if tanh else "clamp"


def _generator_to_diffusers(
    g: Mapping[str, Any], prefix: str, in_channels: int, final_act: str | None
) -> dict[str, Any]:
    resblock = g.get("resblock", "1")
    if resblock not in ("1", "AMP1"):
        raise CheckpointError(f"vocoder resblock {resblock!r}: accepted '1' (HiFi-GAN) and 'AMP1' (BigVGAN)")
    amp = resblock == "AMP1"
    return {
        # HiFi-GAN blocks are diffusers' leaky-ReLU blocks without anti-aliasing; BigVGAN's are anti-aliased.
        f"{prefix}act_fn": g.get("activation", "snake") if amp else "leaky_relu",
        f"{prefix}antialias": amp,
        f"{prefix}antialias_kernel_size": 12,
        f"{prefix}antialias_ratio": 2,
        f"{prefix}final_act_fn": final_act,
        f"{prefix}final_bias": bool(g.get("use_bias_at_final", True)),
        f"{prefix}hidden_channels": g.get("upsample_initial_channel", 1024),
        f"{prefix}in_channels": in_channels,
        f"{prefix}leaky_relu_negative_slope": 0.1,
        f"{prefix}out_channels": 2 if g.get("stereo", True) else 1,
        f"{prefix}resnet_dilations": [list(d) for d in g.get("resblock_dilation_sizes", [[1, 3, 5]] * 3)],
        f"{prefix}resnet_kernel_sizes": list(g.get("resblock_kernel_sizes", [3, 7, 11])),
        f"{prefix}upsample_factors": list(g.get("upsample_rates", [6, 5, 2, 2, 2])),
        f"{prefix}upsample_kernel_sizes": list(g.get("upsample_kernel_sizes", [16, 15, 8, 4, 4])),
    }


def vocoder_to_diffusers(
    vocoder: Mapping[str, Any], *, in_channels: int, bwe_in_channels: int | None = None
) -> dict[str, Any]:
    """diffusers' vocoder config.json from the reference's `vocoder` section: `LTX2VocoderWithBWE` for the
    2.3 layout (with a bandwidth extension), `LTX2Vocoder` for the flat LTX-2.0 one.

    `in_channels` / `bwe_in_channels`: the input widths of the generators' `conv_pre` (stereo x mel bins,
    from their weights: the vocoder's mel bins need not be the audio VAE's)."""
    if "bwe" not in vocoder:
        g = vocoder
        channels = in_channels
        fields = {
            **_generator_to_diffusers(g, "", channels, _final_act(True, bool(g.get("use_tanh_at_final", True)))),
            "output_sampling_rate": g.get("output_sampling_rate", 24000),
        }
        return _stamp(VOCODER_V1_CLASS, fields)
    base, bwe = vocoder["vocoder"], vocoder["bwe"]
    channels = in_channels
    # The reference always applies stage 1's final activation (a clamp unless tanh): diffusers' converter
    # writes None there, under which diffusers does not clamp; "clamp" computes what the reference does.
    base_act = _final_act(True, bool(base.get("use_tanh_at_final", True)))
    bwe_act = _final_act(bool(bwe.get("apply_final_activation", False)), bool(bwe.get("use_tanh_at_final", True)))
    fields = {
        **_generator_to_diffusers(base, "", channels, base_act),
        **_generator_to_diffusers(bwe, "bwe_", channels if bwe_in_channels is None else bwe_in_channels, bwe_act),
        "filter_length": bwe["n_fft"],
        "hop_length": bwe["hop_length"],
        "window_length": bwe["win_size"],
        "num_mel_channels": bwe["num_mels"],
        "input_sampling_rate": bwe["input_sampling_rate"],
        "output_sampling_rate": bwe["output_sampling_rate"],
    }
    return _stamp(VOCODER_CLASS, fields)


_LEAKY = "leaky_relu"


def _generator_from_diffusers(c: _Config, prefix: str) -> dict[str, Any]:
    where = "vocoder"
    act = c[f"{prefix}act_fn"]
    antialias = bool(c[f"{prefix}antialias"])
    # diffusers' leaky-ReLU generator without anti-aliasing is the HiFi-GAN one ("1"); Snake activations
    # with anti-aliasing are BigVGAN's ("AMP1"). The other pairings have no reference generator.
    if act == _LEAKY and not antialias:
        resblock, activation = "1", "snake"
    elif act in ("snake", "snakebeta") and antialias:
        resblock, activation = "AMP1", act
    else:
        raise CheckpointError(
            f"{where}: {prefix}act_fn={act!r} with {prefix}antialias={antialias!r}; accepted: 'leaky_relu' without "
            "antialias (HiFi-GAN) or 'snake'/'snakebeta' with antialias (BigVGAN)"
        )
    if c[f"{prefix}leaky_relu_negative_slope"] != 0.1:
        raise CheckpointError(f"{where}: {prefix}leaky_relu_negative_slope must be 0.1 (the reference's)")
    if (c[f"{prefix}antialias_ratio"], c[f"{prefix}antialias_kernel_size"]) != (2, 12):
        raise CheckpointError(f"{where}: {prefix}antialias_ratio / _kernel_size must be 2 / 12 (the reference's)")
    return {
        "resblock": resblock,
        "resblock_kernel_sizes": list(c[f"{prefix}resnet_kernel_sizes"]),
        "resblock_dilation_sizes": [list(d) for d in c[f"{prefix}resnet_dilations"]],
        "stereo": c[f"{prefix}out_channels"] == 2,
        "activation": activation,
        "use_bias_at_final": bool(c[f"{prefix}final_bias"]),
        "upsample_initial_channel": c[f"{prefix}hidden_channels"],
        "upsample_rates": list(c[f"{prefix}upsample_factors"]),
        "upsample_kernel_sizes": list(c[f"{prefix}upsample_kernel_sizes"]),
    }


def vocoder_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's `vocoder` section: nested with `bwe` from `LTX2VocoderWithBWE`, flat (LTX-2.0) from
    `LTX2Vocoder`. Stage 1's final activation is tanh for "tanh", otherwise the reference's clamp (it has no
    unclamped stage 1; see docs/interop.md)."""
    where = "vocoder"
    found = config.get("_class_name")
    if found not in VOCODER_CLASSES:
        raise CheckpointError(f"{where}: config.json _class_name is {found!r}; expected one of {list(VOCODER_CLASSES)}")
    c = _Config(config, found)
    if found == VOCODER_V1_CLASS:
        if c["final_act_fn"] not in ("tanh", "clamp"):
            raise CheckpointError(
                f"{where}: final_act_fn={c['final_act_fn']!r}; the reference's LTX-2.0 vocoder ends with 'tanh' or "
                "'clamp'"
            )
        return {
            **_generator_from_diffusers(c, ""),
            "use_tanh_at_final": c["final_act_fn"] == "tanh",
            "output_sampling_rate": c["output_sampling_rate"],
        }
    base = {**_generator_from_diffusers(c, ""), "use_tanh_at_final": c["final_act_fn"] == "tanh"}
    bwe = {
        **_generator_from_diffusers(c, "bwe_"),
        "use_tanh_at_final": c["bwe_final_act_fn"] == "tanh",
        "apply_final_activation": c["bwe_final_act_fn"] is not None,
        "input_sampling_rate": c["input_sampling_rate"],
        "output_sampling_rate": c["output_sampling_rate"],
        "hop_length": c["hop_length"],
        "n_fft": c["filter_length"],
        "win_size": c["window_length"],
        "num_mels": c["num_mel_channels"],
    }
    return {"vocoder": base, "bwe": bwe}


# -- latent upsampler -----------------------------------------------------------------------------


def upsampler_to_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    fields = {
        "dims": config.get("dims", 3),
        "in_channels": config["in_channels"],
        "mid_channels": config["mid_channels"],
        "num_blocks_per_stage": config["num_blocks_per_stage"],
        "rational_spatial_scale": float(config.get("spatial_scale", 2.0)),
        "spatial_upsample": bool(config.get("spatial_upsample", True)),
        "temporal_upsample": bool(config.get("temporal_upsample", False)),
        "use_rational_resampler": bool(config.get("rational_resampler", False)),
    }
    return _stamp(UPSAMPLER_CLASS, fields)


def upsampler_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    where = "latent_upsampler"
    _check_class(config, UPSAMPLER_CLASS, where)
    c = _Config(config, UPSAMPLER_CLASS)
    return {
        "_class_name": "LatentUpsampler",
        "in_channels": c["in_channels"],
        "mid_channels": c["mid_channels"],
        "num_blocks_per_stage": c["num_blocks_per_stage"],
        "dims": c["dims"],
        "spatial_upsample": bool(c["spatial_upsample"]),
        "temporal_upsample": bool(c["temporal_upsample"]),
        "spatial_scale": c["rational_spatial_scale"],
        "rational_resampler": bool(c["use_rational_resampler"]),
    }


# -- LTX-2.5: duration head and diffusion decoder (read only) ------------------------------------

DURATION_HEAD_CLASS = "LTX2DurationHead"
DIFFUSION_DECODER_CLASS = "LTX2VideoDiffusionDecoderModel"


def duration_head_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    """The duration-head file's `config` (its context widths under `transformer`, its own sizes under
    `duration_head`) from diffusers' config.json. The head count is the config's: diffusers' converter
    hard-codes 4 in the head it builds, the folder's config.json states the file's."""
    where = "duration_head"
    _check_class(config, DURATION_HEAD_CLASS, where)
    return {
        "transformer": {
            "cross_attention_dim": _require(config, "video_cross_attention_dim", where),
            "audio_cross_attention_dim": _require(config, "audio_cross_attention_dim", where),
        },
        "duration_head": {
            "pooler_hidden_dim": _require(config, "pooler_hidden_dim", where),
            "num_queries": _require(config, "num_queries", where),
            "num_pooler_heads": _require(config, "num_pooler_heads", where),
            "mlp_hidden": _require(config, "mlp_hidden_dim", where),
        },
    }


def diffusion_decoder_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's LTX-2.5 `vae` entries of its diffusion decoder (`decoder` + `model_output_type`)
    from diffusers' config.json.

    diffusers lists the kernels of the four upsampling stages and the stage-5 kernel apart; the reference
    lists five stage kernels, the fifth of which no computation reads: it is given the stage-5 kernel.
    diffusers has no stage-5 width of its own: it is the last stage's, as in the reference's default."""
    where = "diffusion_decoder"
    _check_class(config, DIFFUSION_DECODER_CLASS, where)
    strides = _require(config, "decoder_upsample_strides", where)
    reductions = _require(config, "decoder_upsample_channel_reductions", where)
    if len(strides) != len(reductions):
        raise CheckpointError(f"{where}: {len(strides)} upsample strides but {len(reductions)} channel reductions")
    stage5_kernel = list(_require(config, "decoder_stage5_kernel", where))
    decoder = {
        "in_channels": _require(config, "latent_channels", where),
        "out_channels": _require(config, "out_channels", where),
        "patch_size": _require(config, "patch_size", where),
        "head_dim": _require(config, "decoder_head_dim", where),
        "t_emb_dim": _require(config, "decoder_t_emb_dim", where),
        "default_num_inference_steps": _require(config, "decoder_num_inference_steps", where),
        "timestep_scale_multiplier": _require(config, "decoder_timestep_scale_multiplier", where),
        "stage_channels": list(_require(config, "decoder_stage_channels", where)),
        "stage_depths": list(_require(config, "decoder_stage_depths", where)),
        "stage_kernels": [*(list(k) for k in _require(config, "decoder_stage_kernels", where)), stage5_kernel],
        "upsamples": [[list(s), r] for s, r in zip(strides, reductions)],
        "stage5_kernel": stage5_kernel,
    }
    return {"model_output_type": config.get("decoder_model_output_type", "v"), "decoder": decoder}
