"""Component configs: diffusers' `config.json` of each folder versus the reference's `config` metadata.

The reference's single file describes every component in one `config` object (sections `transformer`,
`vae`, `audio_vae`, `vocoder`; upsampler files a flat object). diffusers keeps one `config.json` per
component folder with its own names. These functions translate both ways for the LTX-2.3 family
(`LTX2VideoTransformer3DModel`, `LTX2TextConnectors`, `AutoencoderKLLTX2Video`, `AutoencoderKLLTX2Audio`,
`LTX2VocoderWithBWE`, `LTX2LatentUpsamplerModel`); anything the reference's models cannot express is
refused naming the field.

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
from collections.abc import Mapping, Sequence
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


def connectors_to_diffusers(config: Mapping[str, Any], *, text_proj_in_factor: int) -> dict[str, Any]:
    """diffusers' connectors config.json from the reference's `transformer` section.

    `text_proj_in_factor`: the text projection's input width over `caption_channels` (from its weight)."""
    t = config
    gated = bool(t.get("connector_apply_gated_attention", False))
    layers = t.get("connector_num_layers", 2)
    registers = t.get("connector_num_learnable_registers", 128)
    fields = {
        "audio_connector_attention_head_dim": t["audio_connector_attention_head_dim"],
        "audio_connector_num_attention_heads": t["audio_connector_num_attention_heads"],
        "audio_connector_num_layers": layers,
        "audio_connector_num_learnable_registers": registers,
        "audio_gated_attn": gated,
        "audio_hidden_dim": t["audio_num_attention_heads"] * t["audio_attention_head_dim"],
        "caption_channels": t["caption_channels"],
        "causal_temporal_positioning": False,
        "connector_rope_base_seq_len": t.get("connector_positional_embedding_max_pos", [4096])[0],
        "per_modality_projections": _uses_v2_text_path(t),
        "proj_bias": True,
        "rope_double_precision": t.get("frequencies_precision", "float32") == "float64",
        "rope_theta": t.get("positional_embedding_theta", 10000.0),
        "rope_type": t.get("rope_type", "split"),
        "text_proj_in_factor": text_proj_in_factor,
        "video_connector_attention_head_dim": t["connector_attention_head_dim"],
        "video_connector_num_attention_heads": t["connector_num_attention_heads"],
        "video_connector_num_layers": layers,
        "video_connector_num_learnable_registers": registers,
        "video_gated_attn": gated,
        "video_hidden_dim": t["num_attention_heads"] * t["attention_head_dim"],
    }
    return _stamp(CONNECTORS_CLASS, fields)


def transformer_from_diffusers(transformer: Mapping[str, Any], connectors: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's `transformer` section (which also describes the text connectors)."""
    where = "transformer"
    _check_class(transformer, TRANSFORMER_CLASS, where)
    _check_class(connectors, CONNECTORS_CLASS, "connectors")
    t, c = transformer, connectors
    for key, value in (("patch_size", 1), ("patch_size_t", 1), ("audio_patch_size", 1), ("audio_patch_size_t", 1)):
        if t.get(key, value) != value:
            raise CheckpointError(f"{where}: {key}={t[key]!r} is not supported (the reference patchifies with 1)")
    if t.get("gated_attn") != t.get("audio_gated_attn") or t.get("cross_attn_mod") != t.get("audio_cross_attn_mod"):
        raise CheckpointError(f"{where}: video and audio streams with different gated_attn / cross_attn_mod")
    if c.get("video_connector_num_layers") != c.get("audio_connector_num_layers") or c.get("video_gated_attn") != c.get(
        "audio_gated_attn"
    ):
        raise CheckpointError("connectors: video and audio connectors with different depth or gating")
    if c.get("video_connector_num_learnable_registers") != c.get("audio_connector_num_learnable_registers"):
        raise CheckpointError("connectors: video and audio connectors with different learnable register counts")
    v2 = bool(c.get("per_modality_projections", False))
    section: dict[str, Any] = {
        "_class_name": "AVTransformer3DModel",
        # The reference's fixed architecture fields (diffusers' config has no counterpart).
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
        "activation_fn": t.get("activation_fn", "gelu-approximate"),
        "attention_bias": t.get("attention_bias", True),
        "norm_elementwise_affine": t.get("norm_elementwise_affine", False),
        "norm_eps": t.get("norm_eps", 1e-6),
        "positional_embedding_max_pos": [
            _require(t, "pos_embed_max_pos", where),
            _require(t, "base_height", where),
            _require(t, "base_width", where),
        ],
        "positional_embedding_theta": t.get("rope_theta", 10000.0),
        "positional_embedding_type": "rope",
        "qk_norm": "rms_norm",
        "timestep_scale_multiplier": t.get("timestep_scale_multiplier", 1000),
        "use_audio_video_cross_attention": True,
        "av_cross_ada_norm": True,
        "audio_positional_embedding_max_pos": [_require(t, "audio_pos_embed_max_pos", where)],
        "connector_positional_embedding_max_pos": [c.get("connector_rope_base_seq_len", 4096)],
        "connector_num_learnable_registers": c.get("video_connector_num_learnable_registers", 128),
        "use_embeddings_connector": True,
        "causal_temporal_positioning": bool(t.get("causal_offset", 1)),
        "in_channels": _require(t, "in_channels", where),
        "out_channels": _require(t, "out_channels", where),
        "audio_in_channels": _require(t, "audio_in_channels", where),
        "audio_out_channels": _require(t, "audio_out_channels", where),
        "num_layers": _require(t, "num_layers", where),
        "num_attention_heads": _require(t, "num_attention_heads", where),
        "attention_head_dim": _require(t, "attention_head_dim", where),
        "cross_attention_dim": _require(t, "cross_attention_dim", where),
        "audio_num_attention_heads": _require(t, "audio_num_attention_heads", where),
        "audio_attention_head_dim": _require(t, "audio_attention_head_dim", where),
        "audio_cross_attention_dim": _require(t, "audio_cross_attention_dim", where),
        "apply_gated_attention": bool(t.get("gated_attn", False)),
        "cross_attention_adaln": bool(t.get("cross_attn_mod", False)),
        "av_ca_timestep_scale_multiplier": t.get("cross_attn_timestep_scale_multiplier", 1),
        "caption_channels": _require(c, "caption_channels", "connectors"),
        "connector_apply_gated_attention": bool(c.get("video_gated_attn", False)),
        "connector_num_layers": c.get("video_connector_num_layers", 2),
        "connector_num_attention_heads": _require(c, "video_connector_num_attention_heads", "connectors"),
        "connector_attention_head_dim": _require(c, "video_connector_attention_head_dim", "connectors"),
        "audio_connector_num_attention_heads": _require(c, "audio_connector_num_attention_heads", "connectors"),
        "audio_connector_attention_head_dim": _require(c, "audio_connector_attention_head_dim", "connectors"),
        "frequencies_precision": "float64" if t.get("rope_double_precision", False) else "float32",
        "rope_type": t.get("rope_type", "split"),
        "ff_bias": bool(t.get("ff_bias", True)),
        "audio_ff_bias": bool(t.get("audio_ff_bias", True)),
        "use_prompt_adaln_single": bool(t.get("use_prompt_adaln_single", True)),
        "use_keyframes_abs_pos_embedding": bool(t.get("use_keyframes_abs_pos_embedding", False)),
    }
    if v2:
        section.update(
            caption_proj_before_connector=True,
            caption_proj_input_norm=False,
            caption_projection_first_linear=False,
            caption_projection_second_linear=False,
            text_encoder_norm_type="per_token_rms",
        )
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
    padding = vae.get("spatial_padding_mode", "zeros")
    time, space, _ = vae_scale_factors(vae)
    fields = {
        "block_out_channels": block_out,
        "decoder_block_out_channels": list(reversed(up_in)),
        "decoder_causal": bool(vae.get("causal_decoder", False)),
        "decoder_inject_noise": [False] * (len(up) + 1),
        # diffusers stores the decoder's per-stage lists in the reference's (not the build) order,
        # except upsample_type, which follows the build order.
        "decoder_layers_per_block": list(reversed([dmid.layers] + [s.layers for s in up])),
        "decoder_spatial_padding_mode": padding,
        "decoder_spatio_temporal_scaling": [True] * len(up),
        "down_block_types": ["LTX2VideoDownBlock3D"] * len(down),
        "downsample_type": [_AXIS_TO_DIFFUSERS[s.resampler.axis] for s in down if s.resampler],
        "encoder_causal": True,
        "encoder_spatial_padding_mode": padding,
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
        "timestep_conditioning": bool(vae.get("timestep_conditioning", True)),
        "upsample_factor": list(reversed(multipliers)),
        "upsample_residual": list(reversed([bool(s.resampler and s.resampler.residual) for s in up])),
        "upsample_type": [_AXIS_TO_DIFFUSERS[s.resampler.axis] for s in up if s.resampler],
    }
    return _stamp(VIDEO_VAE_CLASS, fields)


def video_vae_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's `vae` section from diffusers' vae config.json."""
    where = "vae"
    _check_class(config, VIDEO_VAE_CLASS, where)
    c = config
    padding = c.get("encoder_spatial_padding_mode", "zeros")
    if c.get("decoder_spatial_padding_mode", padding) != padding:
        raise CheckpointError(f"{where}: different encoder / decoder padding modes cannot be expressed in one file")
    if any(c.get("decoder_inject_noise", ())):
        raise CheckpointError(f"{where}: decoder_inject_noise is not supported by the reference's decoder")
    if c.get("patch_size_t", 1) != 1:
        raise CheckpointError(f"{where}: patch_size_t={c['patch_size_t']!r} is not supported (1 only)")
    latent = int(_require(c, "latent_channels", where))
    layers = list(_require(c, "layers_per_block", where))
    down_types = list(_require(c, "downsample_type", where))
    block_out = list(_require(c, "block_out_channels", where))
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

    up_types = list(_require(c, "upsample_type", where))
    factors = list(reversed(_require(c, "upsample_factor", where)))  # build order
    residual = list(reversed(c.get("upsample_residual", [False] * len(up_types))))
    dec_layers = list(reversed(_require(c, "decoder_layers_per_block", where)))  # build order: mid first
    up_in = list(reversed(_require(c, "decoder_block_out_channels", where)))
    if not (len(up_types) == len(factors) == len(up_in) == len(dec_layers) - 1):
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
    return {
        "_class_name": "CausalVideoAutoencoder",
        "dims": 3,
        "in_channels": int(c.get("in_channels", 3)),
        "out_channels": int(c.get("out_channels", 3)),
        "latent_channels": latent,
        "patch_size": int(c.get("patch_size", 4)),
        "norm_layer": "pixel_norm",
        "latent_log_var": "uniform",
        "spatial_padding_mode": padding,
        "timestep_conditioning": bool(c.get("timestep_conditioning", False)),
        "causal_decoder": bool(c.get("decoder_causal", False)),
        "decoder_base_channels": base,
        "encoder_blocks": encoder,
        "decoder_blocks": list(reversed(built)),
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
    c = config
    if not c.get("is_causal", True):
        raise CheckpointError(f"{where}: is_causal=false is not supported (the reference's audio VAE is causal)")
    rate = c.get("sample_rate", 16000)
    return {
        "model": {
            "params": {
                "ddconfig": {
                    "double_z": bool(c.get("double_z", True)),
                    "mel_bins": _require(c, "mel_bins", where),
                    "z_channels": _require(c, "latent_channels", where),
                    "resolution": c.get("resolution", 256),
                    "downsample_time": False,
                    "in_channels": _require(c, "in_channels", where),
                    "out_ch": _require(c, "output_channels", where),
                    "ch": _require(c, "base_channels", where),
                    "ch_mult": list(_require(c, "ch_mult", where)),
                    "num_res_blocks": _require(c, "num_res_blocks", where),
                    "attn_resolutions": list(c.get("attn_resolutions") or []),
                    "dropout": c.get("dropout", 0.0),
                    "mid_block_add_attention": bool(c.get("mid_block_add_attention", False)),
                    "norm_type": c.get("norm_type", "pixel"),
                    "causality_axis": c.get("causality_axis", "height"),
                },
                "sampling_rate": rate,
            }
        },
        "preprocessing": {"audio": {"sampling_rate": rate}, "stft": {"hop_length": c.get("mel_hop_length", 160)}},
    }


_ACT_TO_DIFFUSERS = {"snakebeta": "snakebeta", "snake": "snake"}


def _generator_to_diffusers(g: Mapping[str, Any], prefix: str, in_channels: int, final_act: bool) -> dict[str, Any]:
    if g.get("resblock", "AMP1") != "AMP1":
        raise CheckpointError(f"vocoder resblock {g['resblock']!r}: only the anti-aliased AMP1 blocks are supported")
    return {
        f"{prefix}act_fn": g.get("activation", "snakebeta"),
        f"{prefix}antialias": True,
        f"{prefix}antialias_kernel_size": 12,
        f"{prefix}antialias_ratio": 2,
        f"{prefix}final_act_fn": "tanh" if final_act else None,
        f"{prefix}final_bias": bool(g.get("use_bias_at_final", True)),
        f"{prefix}hidden_channels": g["upsample_initial_channel"],
        f"{prefix}in_channels": in_channels,
        f"{prefix}leaky_relu_negative_slope": 0.1,
        f"{prefix}out_channels": 2 if g.get("stereo", True) else 1,
        f"{prefix}resnet_dilations": [list(d) for d in g["resblock_dilation_sizes"]],
        f"{prefix}resnet_kernel_sizes": list(g["resblock_kernel_sizes"]),
        f"{prefix}upsample_factors": list(g["upsample_rates"]),
        f"{prefix}upsample_kernel_sizes": list(g["upsample_kernel_sizes"]),
    }


def vocoder_to_diffusers(vocoder: Mapping[str, Any], *, mel_bins: int) -> dict[str, Any]:
    """diffusers' LTX2VocoderWithBWE config.json from the reference's `vocoder` section (2.3: with BWE)."""
    if "bwe" not in vocoder:
        raise CheckpointError("vocoder without a bandwidth extension (LTX-2.0) has no LTX2VocoderWithBWE config")
    base, bwe = vocoder["vocoder"], vocoder["bwe"]
    channels = 2 * mel_bins if base.get("stereo", True) else mel_bins
    fields = {
        **_generator_to_diffusers(base, "", channels, bool(base.get("use_tanh_at_final", False))),
        **_generator_to_diffusers(bwe, "bwe_", channels, bool(bwe.get("apply_final_activation", False))),
        "filter_length": bwe["n_fft"],
        "hop_length": bwe["hop_length"],
        "window_length": bwe["win_size"],
        "num_mel_channels": bwe["num_mels"],
        "input_sampling_rate": bwe["input_sampling_rate"],
        "output_sampling_rate": bwe["output_sampling_rate"],
    }
    return _stamp(VOCODER_CLASS, fields)


def _generator_from_diffusers(c: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    where = "vocoder"
    if not c.get(f"{prefix}antialias", True):
        raise CheckpointError(f"{where}: {prefix}antialias=false is not supported (AMP1 blocks are anti-aliased)")
    return {
        "resblock": "AMP1",
        "resblock_kernel_sizes": list(_require(c, f"{prefix}resnet_kernel_sizes", where)),
        "resblock_dilation_sizes": [list(d) for d in _require(c, f"{prefix}resnet_dilations", where)],
        "stereo": c.get(f"{prefix}out_channels", 2) == 2,
        "activation": c.get(f"{prefix}act_fn", "snakebeta"),
        "use_bias_at_final": bool(c.get(f"{prefix}final_bias", True)),
        "upsample_initial_channel": _require(c, f"{prefix}hidden_channels", where),
        "upsample_rates": list(_require(c, f"{prefix}upsample_factors", where)),
        "upsample_kernel_sizes": list(_require(c, f"{prefix}upsample_kernel_sizes", where)),
    }


def vocoder_from_diffusers(config: Mapping[str, Any]) -> dict[str, Any]:
    where = "vocoder"
    _check_class(config, VOCODER_CLASS, where)
    c = config
    base = {**_generator_from_diffusers(c, ""), "use_tanh_at_final": c.get("final_act_fn") == "tanh"}
    bwe = {
        **_generator_from_diffusers(c, "bwe_"),
        "use_tanh_at_final": False,
        "apply_final_activation": c.get("bwe_final_act_fn") is not None,
        "input_sampling_rate": _require(c, "input_sampling_rate", where),
        "output_sampling_rate": _require(c, "output_sampling_rate", where),
        "hop_length": _require(c, "hop_length", where),
        "n_fft": _require(c, "filter_length", where),
        "win_size": _require(c, "window_length", where),
        "num_mels": _require(c, "num_mel_channels", where),
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
    return {
        "_class_name": "LatentUpsampler",
        "in_channels": _require(config, "in_channels", where),
        "mid_channels": _require(config, "mid_channels", where),
        "num_blocks_per_stage": _require(config, "num_blocks_per_stage", where),
        "dims": config.get("dims", 3),
        "spatial_upsample": bool(config.get("spatial_upsample", True)),
        "temporal_upsample": bool(config.get("temporal_upsample", False)),
        "spatial_scale": config.get("rational_spatial_scale", 2.0),
        "rational_resampler": bool(config.get("use_rational_resampler", False)),
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
