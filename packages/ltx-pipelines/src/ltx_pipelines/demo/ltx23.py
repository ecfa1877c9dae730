"""The LTX-2 / LTX-2.3 demo model set: tiny random-weight files in the released single-file layout.

A single-file checkpoint (every component under its released key prefix, `config` and `model_version`
metadata), an x2 spatial upsampler file and a tiny Gemma 3 folder with a locally built tokenizer. Every
file is written by our own modules (random initialisation, seeded); `ltx_pipelines.demo.assets` keeps
them in the user cache. The demo configs here are also the base the LTX-2.5 set (`demo.ltx25`) derives from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_pipelines.demo.files import file_keys_of, randomise_latent_statistics, replace_folder, save_demo_file, seeded

DEMO_VERSION = "1"  # bump when the demo configs change so stale caches are rebuilt
DEMO_MODEL_VERSION = "2.3.0"
DEMO_GEMMA_HIDDEN = 24
DEMO_GEMMA_LAYERS = 3

_BLOCK = {"num_layers": 1}
# The demo vocoder and its bandwidth extension share their residual blocks; they differ in their upsampling.
_DEMO_VOCODER_BLOCKS: dict[str, Any] = {
    "resblock": "AMP1",
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "stereo": True,
    "use_tanh_at_final": False,
    "activation": "snakebeta",
    "use_bias_at_final": False,
    "upsample_initial_channel": 16,
}

DEMO_CONFIG: dict[str, Any] = {
    "transformer": {
        "_class_name": "AVTransformer3DModel",
        "activation_fn": "gelu-approximate",
        "attention_bias": True,
        "norm_elementwise_affine": False,
        "norm_eps": 1e-6,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "positional_embedding_theta": 10000.0,
        "positional_embedding_type": "rope",
        "qk_norm": "rms_norm",
        "standardization_norm": "rms_norm",
        "timestep_scale_multiplier": 1000,
        "use_middle_indices_grid": True,
        "use_audio_video_cross_attention": True,
        "audio_positional_embedding_max_pos": [20],
        "connector_positional_embedding_max_pos": [4096],
        "connector_num_learnable_registers": 128,
        "use_embeddings_connector": True,
        "causal_temporal_positioning": True,
        "in_channels": 128,
        "out_channels": 128,
        "audio_in_channels": 128,
        "audio_out_channels": 128,
        "num_layers": 2,
        "num_attention_heads": 2,
        "attention_head_dim": 16,
        "cross_attention_dim": 32,
        "audio_num_attention_heads": 2,
        "audio_attention_head_dim": 8,
        "audio_cross_attention_dim": 16,
        "apply_gated_attention": True,
        "cross_attention_adaln": True,
        "av_ca_timestep_scale_multiplier": 1000.0,
        "caption_channels": DEMO_GEMMA_HIDDEN,
        "caption_proj_before_connector": True,
        "caption_proj_input_norm": False,
        "caption_projection_first_linear": False,
        "caption_projection_second_linear": False,
        "connector_apply_gated_attention": True,
        "connector_num_layers": 1,
        "connector_num_attention_heads": 2,
        "connector_attention_head_dim": 16,
        "audio_connector_num_attention_heads": 2,
        "audio_connector_attention_head_dim": 8,
        "frequencies_precision": "float64",
        "rope_type": "split",
        "text_encoder_norm_type": "per_token_rms",
    },
    "vae": {
        "_class_name": "CausalVideoAutoencoder",
        "dims": 3,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 128,
        "patch_size": 4,
        "norm_layer": "pixel_norm",
        "latent_log_var": "uniform",
        "spatial_padding_mode": "zeros",
        "timestep_conditioning": False,
        "causal_decoder": False,
        "decoder_base_channels": 4,
        "encoder_blocks": [
            ["res_x", _BLOCK],
            ["compress_space_res", {"multiplier": 1}],
            ["compress_time_res", {"multiplier": 1}],
            ["compress_all_res", {"multiplier": 1}],
            ["compress_all_res", {"multiplier": 2}],
        ],
        "decoder_blocks": [
            ["res_x", _BLOCK],
            ["compress_space", {"multiplier": 2}],
            ["res_x", _BLOCK],
            ["compress_time", {"multiplier": 2}],
            ["res_x", _BLOCK],
            ["compress_all", {"multiplier": 1}],
            ["res_x", _BLOCK],
            ["compress_all", {"multiplier": 2}],
            ["res_x", _BLOCK],
        ],
    },
    "audio_vae": {
        "model": {
            "params": {
                "ddconfig": {
                    "double_z": True,
                    "mel_bins": 64,
                    "z_channels": 8,
                    "resolution": 256,
                    "downsample_time": False,
                    "in_channels": 2,
                    "out_ch": 2,
                    "ch": 16,
                    "ch_mult": [1, 1, 1],
                    "num_res_blocks": 1,
                    "attn_resolutions": [],
                    "dropout": 0.0,
                    "mid_block_add_attention": False,
                    "norm_type": "pixel",
                    "causality_axis": "height",
                },
                "sampling_rate": 16000,
            }
        },
        "preprocessing": {"audio": {"sampling_rate": 16000}, "stft": {"hop_length": 160}},
    },
    "vocoder": {
        "vocoder": {
            **_DEMO_VOCODER_BLOCKS,
            "upsample_rates": [10, 4, 2, 2],
            "upsample_kernel_sizes": [20, 8, 4, 4],
        },
        "bwe": {
            **_DEMO_VOCODER_BLOCKS,
            "upsample_rates": [6, 5, 8],
            "upsample_kernel_sizes": [12, 11, 16],
            "apply_final_activation": False,
            "input_sampling_rate": 16000,
            "output_sampling_rate": 48000,
            "hop_length": 80,
            "n_fft": 512,
            "win_size": 512,
            "num_mels": 64,
        },
    },
}

DEMO_UPSAMPLER_CONFIG: dict[str, Any] = {
    "_class_name": "LatentUpsampler",
    "in_channels": 128,
    "mid_channels": 32,
    "num_blocks_per_stage": 1,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 2.0,
    "rational_resampler": False,
}


@dataclass(frozen=True)
class DemoAssets:
    checkpoint: Path
    spatial_upsampler: Path
    gemma_root: Path

    parts: dict[str, tuple[Path, Callable[[Path], None]]] = field(init=False, repr=False, compare=False)
    """Each part of the set (its name in the cache manifest): where it lives and what writes it."""

    def __post_init__(self) -> None:
        # Worked out with the paths: the cache check and the build read it as a value.
        parts = {
            "checkpoint": (self.checkpoint, write_demo_checkpoint),
            "spatial_upsampler": (self.spatial_upsampler, write_demo_upsampler),
            "gemma": (self.gemma_root, write_demo_gemma),
        }
        object.__setattr__(self, "parts", parts)


def demo_assets_at(root: Path) -> DemoAssets:
    """Where the demo files live under `root` (whether or not they exist yet)."""
    return DemoAssets(
        checkpoint=root / "ltx-demo-distilled.safetensors",
        spatial_upsampler=root / "ltx-demo-spatial-upscaler-x2.safetensors",
        gemma_root=root / "gemma-3-demo",
    )


# ---- the three demo parts -------------------------------------------------------------------------


def write_demo_checkpoint(
    path: Path,
    seed: int = 0,
    *,
    config: Mapping[str, Any] | None = None,
    model_version: str | None = DEMO_MODEL_VERSION,
) -> None:
    """The single-file checkpoint: every component under its released key prefix, config metadata.
    `config`: another architecture of the same components (tests, fixtures; default DEMO_CONFIG);
    `model_version` None: no version entry (as LTX-2.0 files)."""
    config = DEMO_CONFIG if config is None else config
    from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER
    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_core.model.video_vae import VIDEO_DECODER, VIDEO_ENCODER
    from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec

    components = {
        "transformer": AV_TRANSFORMER,
        "text_embeddings": text_embeddings_spec(DEMO_GEMMA_HIDDEN, DEMO_GEMMA_LAYERS + 1),
        "video_encoder": VIDEO_ENCODER,
        "video_decoder": VIDEO_DECODER,
        "audio_encoder": AUDIO_ENCODER,
        "audio_decoder": AUDIO_DECODER,
        "vocoder": VOCODER,
    }

    def build(generator: torch.Generator) -> dict[str, torch.Tensor]:
        tensors: dict[str, torch.Tensor] = {}
        for name, spec in components.items():
            with torch.device("cpu"):
                module = spec.configurator(config)
            for key, value in file_keys_of(name, module).items():
                # Encoder and decoder share the latent statistics; keep the first copy.
                tensors.setdefault(key, value.detach().clone())
        randomise_latent_statistics(tensors, generator)
        return tensors

    tensors = seeded(seed, build)
    metadata = {"config": json.dumps(config)}
    if model_version is not None:
        metadata["model_version"] = model_version
    save_demo_file(tensors, metadata, path)


def write_demo_upsampler(path: Path, seed: int = 0) -> None:
    """The x2 spatial latent upsampler file (flat `config` metadata, keys as they are)."""
    from ltx_core.model.upsampler import LATENT_UPSAMPLER

    def build(_: torch.Generator) -> dict[str, torch.Tensor]:
        with torch.device("cpu"):
            module = LATENT_UPSAMPLER.configurator(DEMO_UPSAMPLER_CONFIG)
        return {k: v.detach().clone() for k, v in module.state_dict().items()}

    tensors = seeded(seed + 1, build)
    save_demo_file(tensors, {"config": json.dumps(DEMO_UPSAMPLER_CONFIG)}, path)


def write_demo_gemma(path: Path, seed: int = 0) -> None:
    """The tiny Gemma 3 folder, built beside `path` and swapped in whole."""
    from ltx_core.text_encoders.gemma import build_tiny_gemma_folder

    def build(tmp: Path) -> None:
        build_tiny_gemma_folder(tmp, hidden_size=DEMO_GEMMA_HIDDEN, num_layers=DEMO_GEMMA_LAYERS, seed=seed)

    replace_folder(path, build)
