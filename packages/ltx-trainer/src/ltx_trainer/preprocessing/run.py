"""The whole preprocessing run for a metadata file: the plan (`preprocessing.plan`), then its stages.

Order: captions -> video latents -> reference latents -> video masks -> audio and reference audio
latents -> audio masks -> decoded previews. Every stage skips samples whose output exists (unless
`overwrite`), writes atomically, and adds its drops to one report, so an interrupted run is resumed
by running it again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.audio_latents import compute_audio_latents
from ltx_trainer.preprocessing.caption_features import compute_caption_features
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.latent_previews import decode_video_folder
from ltx_trainer.preprocessing.masks import compute_audio_masks, compute_video_masks
from ltx_trainer.preprocessing.models import LazyModels
from ltx_trainer.preprocessing.plan import PreprocessPlan, PreprocessSettings, plan_preprocessing
from ltx_trainer.preprocessing.sharding import Shard, shard_device
from ltx_trainer.preprocessing.video_latents import compute_reference_latents, compute_video_latents

logger = logging.getLogger(__name__)


def preprocess_dataset(dataset_path: str | Path, settings: PreprocessSettings, shard: Shard | None = None) -> RunReport:
    """Run every stage the dataset's columns call for; returns the report (also printed by the CLI)."""
    plan = plan_preprocessing(dataset_path, settings, shard)
    report = RunReport(items=len(plan.shard.take(plan.dataset.rows)))
    device = shard_device(settings.device)
    # What every stage takes: the report it adds to, whether to recompute, and this rank's share of the rows.
    common = {"report": report, "overwrite": settings.overwrite, "shard": plan.shard}
    encode_captions(plan, settings, device, common)
    with LazyModels(plan.sources, device=device) as models:
        encode_videos(plan, settings, models, common)
        encode_audio(plan, settings, models, common)
        if settings.decode and plan.shard.is_main:
            decode_previews(plan, settings, models, report)
    if plan.shard.is_main:
        pc.write_manifest(plan.out, settings.manifest())
    logger.info("preprocessing finished: %d file(s) written under %s", report.total_written, plan.out)
    return report


def encode_captions(
    plan: PreprocessPlan, settings: PreprocessSettings, device: str | None, common: dict[str, Any]
) -> None:
    """Captions -> Gemma features in `conditions/` (Gemma is loaded, and freed, inside)."""
    compute_caption_features(
        plan.dataset,
        plan.roles["caption"],
        plan.key_columns,
        plan.out / pc.CONDITIONS,
        checkpoint=plan.caption_files,
        text_encoder_path=settings.text_encoder_path,
        lora_trigger=settings.lora_trigger,
        strip_prefixes=settings.remove_llm_prefixes,
        batch_size=settings.batch_size,
        device=device,
        load_in_8bit=settings.load_text_encoder_in_8bit,
        **common,
    )


def encode_videos(
    plan: PreprocessPlan, settings: PreprocessSettings, models: LazyModels, common: dict[str, Any]
) -> None:
    """Video latents, reference video latents and video masks (each when its column is there)."""
    video_col, roles, out = plan.video_column, plan.roles, plan.out
    if video_col is None:
        return
    video_opts = {"vae_tiling": settings.vae_tiling, "crop_mode": settings.crop_mode, "seed": settings.seed}
    compute_video_latents(plan.dataset, video_col, plan.buckets, out / pc.LATENTS, models, **video_opts, **common)
    if "reference_video" in roles:
        compute_reference_latents(
            plan.dataset,
            roles["reference_video"],
            video_col,
            out / pc.LATENTS,
            out / pc.REFERENCE_LATENTS,
            models,
            downscale_factor=settings.reference_downscale_factor,
            temporal_scale_factor=settings.reference_temporal_scale_factor,
            **video_opts,
            **common,
        )
    if "video_mask" in roles:
        compute_video_masks(
            plan.dataset, roles["video_mask"], video_col, out / pc.LATENTS, out / pc.VIDEO_MASKS, **common
        )


def encode_audio(
    plan: PreprocessPlan, settings: PreprocessSettings, models: LazyModels, common: dict[str, Any]
) -> None:
    """Audio latents (an audio file, else a video's own track), reference audio latents and audio masks."""
    video_col, audio_col, roles, out = plan.video_column, plan.audio_column, plan.roles, plan.out
    audio_sources: list[str] = [audio_col] if audio_col else []
    if video_col is not None and not settings.skip_audio:
        audio_sources.append(video_col)  # a video's own track when the row names no audio file
    audio_opts = {
        "key_columns": plan.key_columns,
        "video_column": video_col,
        "latents_dir": out / pc.LATENTS,
        "durations": settings.audio_durations,
    }
    if audio_sources:
        compute_audio_latents(plan.dataset, audio_sources, out / pc.AUDIO_LATENTS, models, **audio_opts, **common)
    if "reference_audio" in roles:
        compute_audio_latents(
            plan.dataset,
            roles["reference_audio"],
            out / pc.REFERENCE_AUDIO_LATENTS,
            models,
            stage="reference audio",
            **audio_opts,
            **common,
        )
    if "audio_mask" in roles:
        compute_audio_masks(
            plan.dataset, roles["audio_mask"], plan.key_columns, out / pc.AUDIO_LATENTS, out / pc.AUDIO_MASKS, **common
        )


def decode_previews(plan: PreprocessPlan, settings: PreprocessSettings, models: LazyModels, report: RunReport) -> None:
    """The video latents (and reference latents) decoded back to media, for checking by eye."""
    out = plan.out
    decode_video_folder(
        out / pc.LATENTS, out / pc.DECODED_VIDEOS, models, report=report, vae_tiling=settings.vae_tiling,
        overwrite=settings.overwrite,
    )  # fmt: skip
    if (out / pc.REFERENCE_LATENTS).is_dir():
        decode_video_folder(
            out / pc.REFERENCE_LATENTS, out / pc.DECODED_REFERENCE_VIDEOS, models, report=report,
            vae_tiling=settings.vae_tiling, overwrite=settings.overwrite, stage="decode reference",
        )  # fmt: skip
