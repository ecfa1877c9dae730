"""Synthetic `.precomputed/` datasets and configs for the training tests (tiny grids, few tokens)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from ltx_trainer.preprocessing.precomputed import audio_latent_tensors, sample_path, save_sample, video_latent_tensors

TEXT_LEN = 128  # the demo connector has 128 registers; the sequence must be a multiple of that
VIDEO_GRID = (2, 2, 2)  # latent frames, height, width -> 8 tokens
AUDIO_STEPS = 6

MODES: dict[str, dict[str, Any]] = {
    "t2v": {"video": {"latents_dir": "latents"}, "audio": {"latents_dir": "audio_latents"}},
    "i2v": {
        "video": {"latents_dir": "latents", "conditions": [{"type": "first_frame", "probability": 0.5}]},
        "audio": {"latents_dir": "audio_latents"},
    },
    "video_extend": {
        "video": {"latents_dir": "latents", "conditions": [{"type": "prefix", "temporal_boundary": 1}]},
        "audio": {"latents_dir": "audio_latents"},
    },
    "video_suffix": {
        "video": {"latents_dir": "latents", "conditions": [{"type": "suffix", "temporal_boundary": 1}]},
        "audio": {"latents_dir": "audio_latents"},
    },
    "v2v_ic": {
        "video": {
            "latents_dir": "latents",
            "conditions": [
                {"type": "reference", "latents_dir": "reference_latents"},
                {"type": "first_frame", "probability": 0.2},
            ],
        }
    },
    "a2v": {"video": {"latents_dir": "latents"}, "audio": {"latents_dir": "audio_latents", "is_generated": False}},
    "v2a": {"video": {"latents_dir": "latents", "is_generated": False}, "audio": {"latents_dir": "audio_latents"}},
    "video_inpainting": {
        "video": {"latents_dir": "latents", "conditions": [{"type": "mask", "mask_dir": "video_masks"}]}
    },
    "video_outpainting": {
        "video": {
            "latents_dir": "latents",
            "conditions": [{"type": "spatial_crop", "spatial_region": [0, 0, 32, 64]}],
        }
    },
    "t2a": {"audio": {"latents_dir": "audio_latents"}},
    "audio_extend": {
        "audio": {"latents_dir": "audio_latents", "conditions": [{"type": "prefix", "temporal_boundary": 2}]}
    },
    "audio_suffix": {
        "audio": {"latents_dir": "audio_latents", "conditions": [{"type": "suffix", "temporal_boundary": 2}]}
    },
    "audio_inpainting": {
        "audio": {"latents_dir": "audio_latents", "conditions": [{"type": "mask", "mask_dir": "audio_masks"}]}
    },
    "a2a_ic": {
        "audio": {
            "latents_dir": "audio_latents",
            "conditions": [{"type": "reference", "latents_dir": "reference_audio_latents"}],
        }
    },
    "av2av_ic": {
        "video": {"latents_dir": "latents", "conditions": [{"type": "reference", "latents_dir": "reference_latents"}]},
        "audio": {
            "latents_dir": "audio_latents",
            "conditions": [{"type": "reference", "latents_dir": "reference_audio_latents"}],
        },
    },
}


def write_dataset(root: Path, num_samples: int = 4, seed: int = 0, video_dim: int = 32, audio_dim: int = 16) -> Path:
    """Every source folder a mode may read, `num_samples` samples each; returns the `.precomputed` folder."""
    g = torch.Generator().manual_seed(seed)
    pre = root / ".precomputed"
    f, h, w = VIDEO_GRID
    for i in range(num_samples):
        key = Path(f"videos/clip{i:02d}.mp4")
        # A smooth, sample-specific latent pattern: something a LoRA can learn quickly.
        base = torch.linspace(-1, 1, 128).view(128, 1, 1, 1) * (1 + 0.1 * i)
        video = base.expand(128, f, h, w) + 0.1 * torch.randn(128, f, h, w, generator=g)
        audio = torch.linspace(-1, 1, 8).view(8, 1, 1).expand(8, AUDIO_STEPS, 16) + 0.1 * torch.randn(
            8, AUDIO_STEPS, 16, generator=g
        )
        save_sample(sample_path(pre, "latents", key), video_latent_tensors(video, 24.0))
        save_sample(sample_path(pre, "reference_latents", key), video_latent_tensors(video.flip(1), 24.0))
        save_sample(sample_path(pre, "audio_latents", key), audio_latent_tensors(audio, AUDIO_STEPS / 25))
        save_sample(sample_path(pre, "reference_audio_latents", key), audio_latent_tensors(-audio, AUDIO_STEPS / 25))
        save_sample(sample_path(pre, "video_masks", key), {"mask": (torch.rand(f, h, w, generator=g) > 0.5).float()})
        save_sample(
            sample_path(pre, "audio_masks", key), {"mask": (torch.rand(AUDIO_STEPS, generator=g) > 0.5).float()}
        )
        valid = 20 + 10 * i
        mask = torch.zeros(TEXT_LEN, dtype=torch.bool)
        mask[-valid:] = True
        save_sample(
            sample_path(pre, "conditions", key),
            {
                "video_prompt_embeds": torch.randn(TEXT_LEN, video_dim, generator=g) * mask[:, None],
                "audio_prompt_embeds": torch.randn(TEXT_LEN, audio_dim, generator=g) * mask[:, None],
                "prompt_attention_mask": mask,
            },
        )
    return pre


def training_config(
    checkpoint: Path, data_root: Path, output_dir: Path, mode: str = "t2v", **overrides: Any
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model": {"model_path": str(checkpoint), "training_mode": "lora"},
        "lora": {"rank": 4, "alpha": 8, "target_modules": ["to_q", "to_k", "to_v", "to_out.0"]},
        "training_strategy": {"name": "flexible", **copy.deepcopy(MODES[mode])},
        "optimization": {"learning_rate": 1e-3, "steps": 2, "batch_size": 2, "scheduler_type": "linear"},
        "acceleration": {"mixed_precision_mode": "no"},
        "data": {"preprocessed_data_root": str(data_root), "num_dataloader_workers": 0},
        "validation": {"interval": None},
        "checkpoints": {"precision": "float32", "keep_last_n": -1},
        "seed": 7,
        "output_dir": str(output_dir),
    }
    for section, values in overrides.items():
        if isinstance(values, dict) and isinstance(config.get(section), dict):
            config[section] = {**config[section], **values}
        else:
            config[section] = values
    return config
