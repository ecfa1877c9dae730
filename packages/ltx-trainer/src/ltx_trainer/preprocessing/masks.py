"""Inpainting masks on the latent grid: `video_masks/` (F', H', W') and `audio_masks/` (T).

A video mask is fitted to its clip exactly as the clip was (same bucket, same scale and crop, same
temporal stride), then pooled onto the latent grid the way the VAE groups pixels: frame 0 alone,
then frames 1-8, 9-16, ... (the causal encoder's latent frames), and 32 x 32 pixel cells. Pooling
takes the maximum, so a latent cell counts as masked when any pixel in it is (values > 0.5 are the
conditioning tokens at training time).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ltx_pipelines.io import MediaError
from ltx_trainer.preprocessing.buckets import SPATIAL_MULTIPLE, TEMPORAL_MULTIPLE
from ltx_trainer.preprocessing.dataset_file import DatasetFile
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.media import Crop, apply_crop, is_image, probe_media, read_frames, read_stereo_audio
from ltx_trainer.preprocessing.precomputed import LEGACY_SUFFIX, SAMPLE_SUFFIX, load_sample, sample_path, save_sample
from ltx_trainer.preprocessing.sample_loop import Columns, rows_with
from ltx_trainer.preprocessing.sharding import Shard

logger = logging.getLogger(__name__)


def pool_video_mask(
    mask: torch.Tensor, time_factor: int = TEMPORAL_MULTIPLE, cell: int = SPATIAL_MULTIPLE
) -> torch.Tensor:
    """Pixel mask (F, H, W) with F = 1 + k * time_factor -> latent mask (1 + k, H / cell, W / cell) by max."""
    frames, height, width = mask.shape
    if (frames - 1) % time_factor or height % cell or width % cell:
        raise ValueError(
            f"mask of shape {(frames, height, width)} does not fit the VAE grid "
            f"(frames {time_factor}k+1, height and width multiples of {cell})"
        )
    spatial = F.max_pool2d(mask.float().unsqueeze(1), kernel_size=cell).squeeze(1)  # (F, H', W')
    first = spatial[:1]
    rest = spatial[1:].reshape(-1, time_factor, *spatial.shape[1:]).amax(dim=1)
    return torch.cat([first, rest], dim=0)


def pool_audio_mask(mask: torch.Tensor, steps: int) -> torch.Tensor:
    """1-D mask of any length -> `steps` values, each the maximum over its share of the input."""
    if mask.ndim != 1 or mask.numel() == 0:
        raise ValueError(f"audio mask must be a non-empty 1-D tensor; got shape {tuple(mask.shape)}")
    return F.adaptive_max_pool1d(mask.float()[None, None], steps)[0, 0]


def _read_video_mask(
    path: Path, frames: int, stride: int, source_hw: tuple[int, int], crop: Crop, size: tuple[int, int]
) -> torch.Tensor:
    info = probe_media(path)
    if (info.height, info.width) != source_hw:
        raise ValueError(
            f"mask is {info.width}x{info.height} but its clip is {source_hw[1]}x{source_hw[0]}; "
            "a mask must have its clip's size"
        )
    if info.frames == 1:  # a still mask applies to every frame
        pixels = read_frames(path, 1).expand(frames, -1, -1, -1)
    else:
        needed = 1 + (frames - 1) * stride
        if info.frames < needed:
            raise ValueError(f"mask has {info.frames} frames but its clip's bucket needs {needed} (or a 1-frame mask)")
        pixels = read_frames(path, frames, stride)
    gray = pixels.float().mean(dim=-1, keepdim=True) / 255.0  # (F, H, W, 1)
    fitted = apply_crop(gray, crop, size[0], size[1], mode="bilinear")[:, 0]  # (F, h, w)
    return fitted.clamp(0.0, 1.0)


def _pending_masks(
    dataset: DatasetFile,
    mask_column: str,
    key_column: Columns,
    latents_dir: str | Path,
    output_dir: str | Path,
    report: RunReport,
    overwrite: bool,
    shard: Shard | None,
    stage: str,
) -> Iterator[tuple[Any, Path, Path]]:
    """(row, mask file to write, its latents file) for each mask still to compute: existing outputs are
    skipped (unless `overwrite`), and rows whose clip was dropped (no latents; its stage said why) too."""
    for item in rows_with(dataset, mask_column, key_column=key_column, shard=shard, desc=stage):
        target = sample_path(Path(output_dir), "", item.key)
        if target.exists() and not overwrite:
            report.skip(stage)
            continue
        latents_file = sample_path(latents_dir, "", item.key)
        if latents_file.exists():
            yield item, target, latents_file


def compute_video_masks(
    dataset: DatasetFile,
    mask_column: str,
    key_column: str,
    latents_dir: str | Path,
    output_dir: str | Path,
    *,
    report: RunReport,
    overwrite: bool = False,
    shard: Shard | None = None,
    stage: str = "video mask",
) -> None:
    pending = _pending_masks(dataset, mask_column, key_column, latents_dir, output_dir, report, overwrite, shard, stage)
    for item, target, latents_file in pending:
        clip = load_sample(latents_file)
        crop = Crop(**clip.meta_json("crop"))
        size = (int(clip.meta_json("pixel_height")), int(clip.meta_json("pixel_width")))
        source_hw = (int(clip.meta_json("source_height")), int(clip.meta_json("source_width")))
        frames = int(clip.meta_json("pixel_frames"))
        try:
            pixel_mask = _read_video_mask(
                dataset.media_path(item.value), frames, int(clip.meta_json("temporal_stride", 1)), source_hw, crop, size
            )
        except (MediaError, ValueError) as e:
            report.drop(stage, item.value, str(e))
            continue
        mask = pool_video_mask(pixel_mask)
        expected = tuple(clip.tensors["latents"].shape[1:])
        if tuple(mask.shape) != expected:  # cannot happen for files this package wrote; guards foreign latents
            report.drop(stage, item.value, f"mask grid {tuple(mask.shape)} differs from the latents {expected}")
            continue
        save_sample(target, {"mask": mask}, {"source": item.value, "latents": str(item.key)})
        report.wrote(stage)


def _read_audio_mask(path: Path) -> torch.Tensor:
    """A 1-D mask from a tensor file (`mask` in .safetensors / .pt) or from an audio file's amplitude."""
    if path.suffix in (SAMPLE_SUFFIX, LEGACY_SUFFIX):
        tensors = load_sample(path).tensors
        if "mask" not in tensors:
            raise ValueError(f"{path.name} has no 'mask' tensor (it has {sorted(tensors)})")
        return tensors["mask"].flatten().float()
    if is_image(path):
        raise ValueError("an audio mask must be a tensor file (.safetensors/.pt with 'mask') or an audio file")
    return read_stereo_audio(path).waveform.abs().amax(dim=0)


def compute_audio_masks(
    dataset: DatasetFile,
    mask_column: str,
    key_column: Columns,
    audio_latents_dir: str | Path,
    output_dir: str | Path,
    *,
    report: RunReport,
    overwrite: bool = False,
    shard: Shard | None = None,
    stage: str = "audio mask",
) -> None:
    pending = _pending_masks(
        dataset, mask_column, key_column, audio_latents_dir, output_dir, report, overwrite, shard, stage
    )
    for item, target, latents_file in pending:
        steps = int(load_sample(latents_file).tensors["latents"].shape[1])
        try:
            raw = _read_audio_mask(dataset.media_path(item.value))
        except (MediaError, ValueError, OSError) as e:
            report.drop(stage, item.value, f"unreadable mask: {e}")
            continue
        save_sample(target, {"mask": pool_audio_mask(raw, steps)}, {"source": item.value})
        report.wrote(stage)
