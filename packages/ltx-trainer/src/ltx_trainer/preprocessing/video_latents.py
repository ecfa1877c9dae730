"""Video (and reference video) -> VAE latents under `.precomputed/latents/` (`reference_latents/`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from ltx_pipelines.io import MediaError
from ltx_trainer.preprocessing.buckets import Bucket, choose_bucket, reference_bucket
from ltx_trainer.preprocessing.dataset_file import DatasetFile
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.media import (
    Crop,
    MediaInfo,
    crop_like,
    frames_to_vae_input,
    plan_crop,
    probe_media,
    read_frames,
)
from ltx_trainer.preprocessing.models import LazyModels, encode_video
from ltx_trainer.preprocessing.precomputed import load_sample, sample_path, save_sample, video_latent_tensors
from ltx_trainer.preprocessing.sample_loop import rows_with, sample_generator
from ltx_trainer.preprocessing.sharding import Shard

logger = logging.getLogger(__name__)


def _encode(
    models: LazyModels,
    media: Path,
    info: MediaInfo,
    bucket: Bucket,
    *,
    stride: int,
    crop_mode: str,
    seed: int,
    key: Path,
    tiled: bool,
    align_to: tuple[Crop, int, int] | None = None,
) -> tuple[Crop, torch.Tensor]:
    """Fit the clip's first frames (every `stride`-th) to `bucket` and encode them: (crop, latents)."""
    if align_to is not None:  # a reference clip: cut where its target was cut
        target_crop, target_h, target_w = align_to
        crop = crop_like(target_crop, target_h, target_w, info.height, info.width, bucket.height, bucket.width)
    else:
        crop = plan_crop(info.height, info.width, bucket.height, bucket.width, crop_mode, sample_generator(seed, key))
    frames = read_frames(media, bucket.frames, stride)
    pixels = frames_to_vae_input(frames, crop, bucket.height, bucket.width)
    return crop, encode_video(models.video_encoder(), pixels, tiled=tiled)


def _metadata(source: str, bucket: Bucket, info: MediaInfo, crop: Crop, stride: int, fps: float) -> dict:
    return {
        "source": source,
        "bucket": str(bucket),
        "pixel_frames": bucket.frames,
        "pixel_height": bucket.height,
        "pixel_width": bucket.width,
        "source_height": info.height,
        "source_width": info.width,
        "source_fps": info.fps,
        "is_image": info.is_image,
        "crop": crop.as_dict(),
        "temporal_stride": stride,
        "fps": fps,
    }


def compute_video_latents(
    dataset: DatasetFile,
    video_column: str,
    buckets: Sequence[Bucket],
    output_dir: str | Path,
    models: LazyModels,
    *,
    report: RunReport,
    vae_tiling: bool = False,
    crop_mode: str = "center",
    seed: int = 0,
    overwrite: bool = False,
    shard: Shard | None = None,
    stage: str = "video",
) -> None:
    """Encode every clip of `video_column` in its bucket; clips shorter than every bucket, unreadable
    files and images without a 1-frame bucket are dropped and reported."""
    out_root = Path(output_dir)
    for item in rows_with(dataset, video_column, shard=shard, desc=f"{stage} latents"):
        target = sample_path(out_root, "", item.key)
        if target.exists() and not overwrite:
            report.skip(stage)
            continue
        media = dataset.media_path(item.value)
        try:
            info = probe_media(media)
        except MediaError as e:
            report.drop(stage, item.value, f"unreadable: {e}")
            continue
        bucket = choose_bucket(buckets, info.width, info.height, info.frames, is_image=info.is_image)
        if bucket is None:
            if info.is_image:
                report.drop(stage, item.value, "an image, but no resolution bucket has 1 frame (e.g. 512x512x1)")
            else:
                smallest = min((b.frames for b in buckets if b.frames > 1), default=1)
                report.drop(stage, item.value, f"too short: {info.frames} frames, the shortest bucket needs {smallest}")
            continue
        try:
            crop, latents = _encode(
                models, media, info, bucket, stride=1, crop_mode=crop_mode, seed=seed, key=item.key, tiled=vae_tiling
            )
        except MediaError as e:
            report.drop(stage, item.value, f"unreadable: {e}")
            continue
        meta = _metadata(item.value, bucket, info, crop, 1, info.fps)
        save_sample(target, video_latent_tensors(latents, info.fps), meta)
        report.wrote(stage)


def compute_reference_latents(
    dataset: DatasetFile,
    reference_column: str,
    key_column: str,
    latents_dir: str | Path,
    output_dir: str | Path,
    models: LazyModels,
    *,
    report: RunReport,
    downscale_factor: int = 1,
    temporal_scale_factor: int = 1,
    vae_tiling: bool = False,
    crop_mode: str = "center",
    seed: int = 0,
    overwrite: bool = False,
    shard: Shard | None = None,
    stage: str = "reference video",
) -> None:
    """Encode each row's reference clip in its target's bucket, divided in space by `downscale_factor`
    and subsampled in time by `temporal_scale_factor` (frame 0, then every S-th frame).

    Both factors are recorded in every reference file's metadata, beside the latents the trainer reads.
    Rows whose target clip has no latents (it was dropped) are skipped: the drop is already reported.
    """
    out_root = Path(output_dir)
    for item in rows_with(dataset, reference_column, key_column=key_column, shard=shard, desc=f"{stage} latents"):
        target = sample_path(out_root, "", item.key)
        if target.exists() and not overwrite:
            report.skip(stage)
            continue
        target_latents = sample_path(latents_dir, "", item.key)
        if not target_latents.exists():
            logger.info("no target latents for %s; skipping its reference", item.key)
            continue
        target_meta = load_sample(target_latents)
        target_bucket = Bucket(*_bucket_of(target_latents))
        align = (Crop(**target_meta.meta_json("crop")), target_bucket.height, target_bucket.width)
        ref_bucket = reference_bucket(target_bucket, downscale_factor, temporal_scale_factor)
        encoded = _encode_reference(
            models, dataset.media_path(item.value), target_bucket, ref_bucket, temporal_scale_factor, align,
            crop_mode=crop_mode, seed=seed, key=item.key, tiled=vae_tiling,
        )  # fmt: skip
        if isinstance(encoded, str):
            report.drop(stage, item.value, encoded)
            continue
        info, crop, latents = encoded
        fps = info.fps / temporal_scale_factor
        meta = _metadata(item.value, ref_bucket, info, crop, temporal_scale_factor, fps)
        meta.update(
            reference_downscale_factor=downscale_factor,
            reference_temporal_scale_factor=temporal_scale_factor,
            target_bucket=str(target_bucket),
        )
        save_sample(target, video_latent_tensors(latents, fps), meta)
        report.wrote(stage)


def _encode_reference(
    models: LazyModels,
    media: Path,
    target_bucket: Bucket,
    ref_bucket: Bucket,
    stride: int,
    align: tuple[Crop, int, int],
    *,
    crop_mode: str,
    seed: int,
    key: Path,
    tiled: bool,
) -> tuple[MediaInfo, Crop, torch.Tensor] | str:
    """The reference clip encoded in `ref_bucket` (every `stride`-th frame, cropped like its target), or the
    reason it is dropped."""
    try:
        info = probe_media(media)
        needed = 1 + (ref_bucket.frames - 1) * stride
        if info.frames < needed:
            return f"too short: {info.frames} frames; the reference of bucket {target_bucket} needs {needed}"
        crop, latents = _encode(
            models, media, info, ref_bucket, stride=stride, crop_mode=crop_mode, seed=seed, key=key, tiled=tiled,
            align_to=align,
        )  # fmt: skip
    except MediaError as e:
        return f"unreadable: {e}"
    return info, crop, latents


def _bucket_of(latents_file: Path) -> tuple[int, int, int]:
    sample = load_sample(latents_file)
    return (
        int(sample.meta_json("pixel_width")),
        int(sample.meta_json("pixel_height")),
        int(sample.meta_json("pixel_frames")),
    )
