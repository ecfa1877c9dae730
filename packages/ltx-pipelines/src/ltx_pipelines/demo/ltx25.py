"""The LTX-2.5 demo model set: tiny random-weight files in the released split layout.

One file per component, named and laid out as the LTX-2.5 release is (transformer with its
embeddings connectors, packed Gemma 4 text encoder with the text projection and its tokenizer,
video VAE with the diffusion decoder, the same VAE with a convolutional decoder, audio VAE with the
vocoder, duration head, spatial and temporal x2 latent upsamplers), each carrying the metadata the
released files carry: `config` (the component's sections), `model_version`, and in the transformer
`gemma_source_checkpoint.gemma_version`, which the packed encoder's `gemma_config.gemma_version`
matches. Beside them, the two IC-LoRAs the LTX-2.5 pipelines take, in the ComfyUI layout the released
IC-LoRAs use (`diffusion_model.<module>.lora_A.weight` (r, in) / `.lora_B.weight` (out, r), bfloat16, no
alpha) with their `reference_downscale_factor`: the Dub-It one (`python -m ltx_pipelines.dubit`) and the
x2 detailing one (`python -m ltx_pipelines.dfr`). Every file is written by our own modules (random
initialisation, seeded); `ltx_pipelines.demo.assets` keeps them in the same atomic, manifest-checked cache
as the LTX-2.3 demo set (`demo.ltx23`), whose tiny configs these derive from.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_core.loader import ModelFiles
from ltx_pipelines.demo.files import file_keys_of, randomise_latent_statistics, save_demo_file, seeded
from ltx_pipelines.demo.ltx23 import DEMO_CONFIG, DEMO_UPSAMPLER_CONFIG
from ltx_pipelines.engine.model_versions import DEMO_LTX25_MODEL_VERSION
from ltx_pipelines.io.atomic_files import apply_umask, atomic_output

DEMO_LTX25_VERSION = "2"  # bump when a 2.5 demo config changes so stale caches are rebuilt
DEMO_GEMMA4_VERSION = "gemma4-demo-ltx-v1"
DEMO_GEMMA4_HIDDEN = 16
DEMO_GEMMA4_LAYERS = 2


def _demo_base() -> dict[str, Any]:
    return copy.deepcopy(DEMO_CONFIG)


def ltx25_transformer_config() -> dict[str, Any]:
    """The tiny transformer section with the LTX-2.5 architecture flags (bias-free feed-forwards and
    connectors, no prompt AdaLN, the keyframe absolute-position embedding)."""
    transformer = _demo_base()["transformer"]
    transformer.update(
        {
            "caption_channels": DEMO_GEMMA4_HIDDEN,
            "ff_bias": False,
            "audio_ff_bias": False,
            "connector_ff_bias": False,
            "use_prompt_adaln_single": False,
            "use_keyframes_abs_pos_embedding": True,
        }
    )
    return transformer


def ltx25_diffusion_vae_config() -> dict[str, Any]:
    """`CausalDiffusionVAE`: the demo's convolutional encoder (32 x 32 x 8) in an `encoder` object, and a
    small diffusion decoder whose upsampling stages undo the same factors (x8 in time, x32 in space
    with the patch size 4). The head dim stays 16: the decoder's 3-axis RoPE needs a temporal share."""
    conv = _demo_base()["vae"]
    encoder = {k: conv[k] for k in ("dims", "in_channels", "patch_size", "norm_layer", "latent_log_var")}
    encoder.update(
        {"out_channels": conv["latent_channels"], "spatial_padding_mode": "zeros", "blocks": conv["encoder_blocks"]}
    )
    kernel = [3, 3, 3]
    return {
        "_class_name": "CausalDiffusionVAE",
        "latent_channels": conv["latent_channels"],
        "model_output_type": "v",
        "encoder": encoder,
        "decoder": {
            "in_channels": conv["latent_channels"],
            "out_channels": 3,
            "patch_size": conv["patch_size"],
            "head_dim": 16,
            "t_emb_dim": 32,
            "default_num_inference_steps": 2,
            "timestep_scale_multiplier": 1000.0,
            "stage_channels": [32, 16, 16, 16, 16],
            "stage_depths": [1, 1, 1, 1, 1],
            "stage_kernels": [kernel] * 5,
            "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 1], [[2, 2, 2], 1], [[2, 2, 2], 1]],
            "stage5_kernel": kernel,
            "stage5_channels": 16,
        },
    }


DEMO_LTX25_DURATION_HEAD = {"pooler_hidden_dim": 16, "num_queries": 1, "num_pooler_heads": 2, "mlp_hidden": 16}


def _upsampler_config(*, temporal: bool) -> dict[str, Any]:
    # 64 channels in 32 norm groups: DFR upsamples single keyframes, which at the smallest size (64x64, a 1x1
    # half-size latent) leave a group of one value with 32 channels, which torch's group norm refuses.
    return {
        **DEMO_UPSAMPLER_CONFIG,
        "mid_channels": 64,
        "spatial_upsample": not temporal,
        "temporal_upsample": temporal,
    }


@dataclass(frozen=True)
class Ltx25DemoAssets:
    """Where the LTX-2.5 demo files live. `model_files()` is the split set the pipelines take."""

    transformer: Path
    text_encoder: Path
    video_vae: Path  # diffusion decoder (`ltx-2.5-video-vae-bf16` layout)
    video_vae_conv: Path  # convolutional decoder (`ltx-2.5-video-vae-conv-bf16` layout)
    audio_vae: Path
    duration_head: Path
    spatial_upsampler: Path
    temporal_upsampler: Path
    dubit_ic_lora: Path
    detailing_ic_lora: Path

    @property
    def root(self) -> Path:
        return self.transformer.parent

    parts: dict[str, tuple[Path, Callable[[Path], None]]] = field(init=False, repr=False, compare=False)
    """Each part of the set (its name in the cache manifest): where it lives and what writes it."""

    def __post_init__(self) -> None:
        # Worked out with the paths: the cache check and the build read it as a value. Each part is named
        # after its field.
        parts = dict(
            transformer=(self.transformer, write_ltx25_transformer),
            text_encoder=(self.text_encoder, write_ltx25_text_encoder),
            video_vae=(self.video_vae, write_ltx25_video_vae),
            video_vae_conv=(self.video_vae_conv, write_ltx25_video_vae_conv),
            audio_vae=(self.audio_vae, write_ltx25_audio_vae),
            duration_head=(self.duration_head, write_ltx25_duration_head),
            spatial_upsampler=(self.spatial_upsampler, write_ltx25_spatial_upsampler),
            temporal_upsampler=(self.temporal_upsampler, write_ltx25_temporal_upsampler),
            dubit_ic_lora=(self.dubit_ic_lora, write_ltx25_dubit_ic_lora),
            detailing_ic_lora=(self.detailing_ic_lora, write_ltx25_detailing_ic_lora),
        )
        object.__setattr__(self, "parts", parts)

    def model_files(self, *, conv_vae: bool = False, duration_head: bool = True) -> ModelFiles:
        """The split set (diffusion-decoder VAE unless `conv_vae`; with the duration head unless told not)."""
        return ModelFiles.split(
            transformer=self.transformer,
            text_encoder=self.text_encoder,
            video_vae=self.video_vae_conv if conv_vae else self.video_vae,
            audio_vae=self.audio_vae,
            duration_head=self.duration_head if duration_head else None,
        )


def ltx25_demo_assets_at(root: Path) -> Ltx25DemoAssets:
    return Ltx25DemoAssets(
        transformer=root / "ltx-2.5-demo-distilled-transformer.safetensors",
        text_encoder=root / "gemma4-demo-with-proj-ltx-2.5.safetensors",
        video_vae=root / "ltx-2.5-demo-video-vae.safetensors",
        video_vae_conv=root / "ltx-2.5-demo-video-vae-conv.safetensors",
        audio_vae=root / "ltx-2.5-demo-audio-vae.safetensors",
        duration_head=root / "ltx-2.5-demo-duration-head.safetensors",
        spatial_upsampler=root / "ltx-2.5-demo-latent-spatial-upscaler-x2.safetensors",
        temporal_upsampler=root / "ltx-2.5-demo-latent-temporal-upscaler-x2.safetensors",
        dubit_ic_lora=root / "ltx-2.5-demo-dubit-ic-lora.safetensors",
        detailing_ic_lora=root / "ltx-2.5-demo-detailing-ic-lora.safetensors",
    )


# ---- writers ----------------------------------------------------------------------------------------


def _metadata(config: dict[str, Any], **extra: Any) -> dict[str, str]:
    meta = {"config": json.dumps(config), "model_version": DEMO_LTX25_MODEL_VERSION}
    meta.update({k: json.dumps(v) for k, v in extra.items()})
    return meta


def write_ltx25_transformer(path: Path, seed: int = 10) -> None:
    """The transformer with the video / audio embeddings connectors (`model.diffusion_model.*`)."""
    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec

    config = {"transformer": ltx25_transformer_config()}
    embeddings = text_embeddings_spec(DEMO_GEMMA4_HIDDEN, DEMO_GEMMA4_LAYERS + 1)

    def build(generator: torch.Generator) -> dict[str, torch.Tensor]:
        tensors = file_keys_of("transformer", AV_TRANSFORMER.configurator(config))
        # The text projection lives in the text-encoder file; only the connectors belong here.
        connectors = file_keys_of("text_embeddings", embeddings.configurator(config))
        tensors.update({k: v for k, v in connectors.items() if k.startswith("model.diffusion_model.")})
        tensors = {k: v.detach().clone() for k, v in tensors.items()}
        # Initialised to zeros, which would make the keyframe embedding a no-op in the demo.
        key = "model.diffusion_model.keyframes_abs_pos_embedding"
        tensors[key] = 0.1 * torch.randn(tensors[key].shape, generator=generator)
        return tensors

    with torch.device("cpu"):
        tensors = seeded(seed, build)
    gemma = {"gemma_version": DEMO_GEMMA4_VERSION}
    save_demo_file(tensors, _metadata(config, gemma_source_checkpoint=gemma), path)


def write_ltx25_text_encoder(path: Path, seed: int = 11) -> None:
    """The packed Gemma 4 (tokenizer inside) with the LTX text projection to the connector widths."""
    from ltx_core.text_encoders.gemma.tiny_packed import build_tiny_packed_gemma4

    transformer = ltx25_transformer_config()
    widths = (
        transformer["num_attention_heads"] * transformer["attention_head_dim"],
        transformer["audio_num_attention_heads"] * transformer["audio_attention_head_dim"],
    )
    with atomic_output(path, overwrite=True) as tmp:
        build_tiny_packed_gemma4(
            tmp,
            hidden_size=DEMO_GEMMA4_HIDDEN,
            num_layers=DEMO_GEMMA4_LAYERS,
            seed=seed,
            projection_widths=widths,
            gemma_version=DEMO_GEMMA4_VERSION,
        )
        apply_umask(tmp)


# Static gates the released diffusion-decoder file stores beside the layers they scale (the loader
# folds them into those layers' weights).
_DECODER_GATES = {"gate_msa": "attn.proj", "gate_mlp": "mlp.w_down", "gate_ctx": "context_proj"}


def _video_vae_tensors(vae: dict[str, Any], generator: torch.Generator, *, diffusion: bool) -> dict[str, torch.Tensor]:
    from ltx_core.model.video_vae import (
        VIDEO_ENCODER,
        diffusion_video_decoder_from_config,
        video_decoder_from_config,
    )

    config = {"vae": vae}
    # The encoder (and the latent statistics) come from the diffusion VAE's config in both files, so the
    # two decoders read the same latents.
    encoder_config = {"vae": ltx25_diffusion_vae_config()}
    tensors = {
        k: v.detach().clone()
        for k, v in file_keys_of("video_encoder", VIDEO_ENCODER.configurator(encoder_config)).items()
    }
    randomise_latent_statistics(tensors, generator)
    if diffusion:
        decoder = diffusion_video_decoder_from_config(config)
        for key, value in decoder.state_dict().items():
            if not key.startswith("per_channel_statistics."):
                tensors["vae.decoder." + key] = value
        for key in [k for k in tensors if k.endswith(".context_proj.weight")]:
            block = key[: -len("context_proj.weight")]
            for gate, layer in _DECODER_GATES.items():
                rows = tensors[block + layer + ".weight"].shape[0]
                tensors[block + gate] = 0.5 + torch.rand(rows, generator=generator)
    else:
        tensors.update(
            {
                k: v
                for k, v in file_keys_of("video_decoder", video_decoder_from_config(config)).items()
                if "per_channel" not in k
            }
        )
    return {k: v.detach().clone() for k, v in tensors.items()}


def write_ltx25_video_vae(path: Path, seed: int = 12) -> None:
    """`CausalDiffusionVAE`: conv encoder + diffusion decoder in the released raw layout (fused qkv,
    static gates stored apart)."""
    vae = ltx25_diffusion_vae_config()
    with torch.device("cpu"):
        tensors = seeded(seed, lambda g: _video_vae_tensors(vae, g, diffusion=True))
    save_demo_file(tensors, _metadata({"vae": vae}), path)


def write_ltx25_video_vae_conv(path: Path, seed: int = 12) -> None:
    """`CausalVideoAutoencoder`: the same encoder (same seed) with the demo's convolutional decoder."""
    vae = _demo_base()["vae"]
    with torch.device("cpu"):
        tensors = seeded(seed, lambda g: _video_vae_tensors(vae, g, diffusion=False))
    save_demo_file(tensors, _metadata({"vae": vae}), path)


def write_ltx25_audio_vae(path: Path, seed: int = 13) -> None:
    """Audio VAE encoder / decoder (`audio_vae.*`) and the vocoder with bandwidth extension (`vocoder.*`)."""
    from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER

    base = _demo_base()
    config = {"audio_vae": base["audio_vae"], "vocoder": base["vocoder"]}

    def build(generator: torch.Generator) -> dict[str, torch.Tensor]:
        tensors: dict[str, torch.Tensor] = {}
        for name, spec in (("audio_encoder", AUDIO_ENCODER), ("audio_decoder", AUDIO_DECODER), ("vocoder", VOCODER)):
            for key, value in file_keys_of(name, spec.configurator(config)).items():
                tensors.setdefault(key, value.detach().clone())  # encoder and decoder share the statistics
        randomise_latent_statistics(tensors, generator)
        return tensors

    with torch.device("cpu"):
        tensors = seeded(seed, build)
    save_demo_file(tensors, _metadata(config), path)


def write_ltx25_duration_head(path: Path, seed: int = 14) -> None:
    """The duration head (`duration_head.*`); its config names the context widths it pools."""
    from ltx_core.model.duration_head import DURATION_HEAD

    transformer = ltx25_transformer_config()
    config = {
        "transformer": {k: transformer[k] for k in ("cross_attention_dim", "audio_cross_attention_dim")},
        "duration_head": dict(DEMO_LTX25_DURATION_HEAD),
    }

    def build(_: torch.Generator) -> dict[str, torch.Tensor]:
        head = DURATION_HEAD.configurator(config)
        return {"duration_head." + k: v.detach().clone() for k, v in head.state_dict().items()}

    with torch.device("cpu"):
        tensors = seeded(seed, build)
    save_demo_file(tensors, _metadata(config), path)


def _write_upsampler(path: Path, seed: int, *, temporal: bool) -> None:
    from ltx_core.model.upsampler import LATENT_UPSAMPLER

    config = _upsampler_config(temporal=temporal)

    def build(_: torch.Generator) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in LATENT_UPSAMPLER.configurator(config).state_dict().items()}

    with torch.device("cpu"):
        tensors = seeded(seed, build)
    # Upsampler files carry their flat config only, as released.
    save_demo_file(tensors, {"config": json.dumps(config)}, path)


def write_ltx25_spatial_upsampler(path: Path, seed: int = 15) -> None:
    _write_upsampler(path, seed, temporal=False)


def write_ltx25_temporal_upsampler(path: Path, seed: int = 16) -> None:
    _write_upsampler(path, seed, temporal=True)


# ---- IC-LoRAs -----------------------------------------------------------------------------------------

_ATTENTION_PROJECTIONS = ("to_q", "to_k", "to_v", "to_out.0")
_VIDEO_ATTENTIONS = ("attn1", "attn2")
_ALL_ATTENTIONS = (*_VIDEO_ATTENTIONS, "audio_attn1", "audio_attn2", "audio_to_video_attn", "video_to_audio_attn")
_FEED_FORWARD = ("net.0.proj", "net.2")
DUBIT_TARGETS = (
    *(f"{attn}.{proj}" for attn in _ALL_ATTENTIONS for proj in _ATTENTION_PROJECTIONS),
    *(f"{ff}.{layer}" for ff in ("ff", "audio_ff") for layer in _FEED_FORWARD),
)
"""The Dub-It IC-LoRA adapts every attention (video, audio and both cross-modal ones) and both feed-forwards
of each block: dubbing changes speech and the lips that follow it."""
DETAILING_TARGETS = (
    *(f"{attn}.{proj}" for attn in _VIDEO_ATTENTIONS for proj in _ATTENTION_PROJECTIONS),
    *(f"ff.{layer}" for layer in _FEED_FORWARD),
)
"""The detailing IC-LoRA adapts the video stream only (its self / text attentions and feed-forward)."""
DUBIT_REFERENCE_DOWNSCALE = 1
DETAILING_REFERENCE_DOWNSCALE = 2  # the reference is the half-size stage-1 latent
# Small updates: the demo weights stay in the range the random transformer was initialised in.
_IC_LORA_SCALE = 0.05


def _write_ic_lora(path: Path, seed: int, *, targets: tuple[str, ...], rank: int, downscale: int) -> None:
    """A random IC-LoRA for the demo transformer: a rank-`rank` pair for each `targets` module of every block,
    shapes read off the transformer built on the meta device (no weights are made for it)."""
    from ltx_core.model.transformer import AV_TRANSFORMER

    with torch.device("meta"):
        transformer = AV_TRANSFORMER.configurator({"transformer": ltx25_transformer_config()})
    linears = {name: module for name, module in transformer.named_modules() if isinstance(module, torch.nn.Linear)}
    generator = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for block in range(len(transformer.transformer_blocks)):
        for target in targets:
            name = f"transformer_blocks.{block}.{target}"
            out_features, in_features = linears[name].weight.shape
            a = torch.randn(rank, in_features, generator=generator) * _IC_LORA_SCALE
            b = torch.randn(out_features, rank, generator=generator) * _IC_LORA_SCALE
            tensors[f"diffusion_model.{name}.lora_A.weight"] = a
            tensors[f"diffusion_model.{name}.lora_B.weight"] = b
    # IC-LoRA files carry only the reference scale (a JSON number, as the released files write it).
    save_demo_file(tensors, {"reference_downscale_factor": json.dumps(downscale)}, path)


def write_ltx25_dubit_ic_lora(path: Path, seed: int = 17) -> None:
    _write_ic_lora(path, seed, targets=DUBIT_TARGETS, rank=3, downscale=DUBIT_REFERENCE_DOWNSCALE)


def write_ltx25_detailing_ic_lora(path: Path, seed: int = 18) -> None:
    _write_ic_lora(path, seed, targets=DETAILING_TARGETS, rank=2, downscale=DETAILING_REFERENCE_DOWNSCALE)
