"""The whole preprocessing run for a metadata file, column role by column role.

Order: captions -> video latents -> reference latents -> video masks -> audio and reference audio
latents -> audio masks -> decoded previews. Every stage skips samples whose output exists (unless
`overwrite`), writes atomically, and adds its drops to one report, so an interrupted run is resumed
by running it again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from ltx_core.devices import resolve_device
from ltx_core.loader import Layout
from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit
from ltx_core.types import SpatioTemporalScaleFactors
from ltx_trainer import precomputed as pc
from ltx_trainer.audio_latents import compute_audio_latents
from ltx_trainer.buckets import SPATIAL_MULTIPLE, TEMPORAL_MULTIPLE, Bucket, BucketError, reference_bucket
from ltx_trainer.captions import compute_caption_features
from ltx_trainer.dataset_file import DatasetFileError, read_dataset, resolve_roles
from ltx_trainer.decoding import decode_video_folder
from ltx_trainer.drop_report import RunReport
from ltx_trainer.masks import compute_audio_masks, compute_video_masks
from ltx_trainer.model_files import check_vae_files, training_model_files
from ltx_trainer.models import LazyModels, ModelSources
from ltx_trainer.sharding import Shard, current_shard, shard_device
from ltx_trainer.video_latents import compute_reference_latents, compute_video_latents

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreprocessSettings:
    model_path: Path
    text_encoder_path: Path
    resolution_buckets: tuple[Bucket, ...] = ()
    video_vae_path: Path | None = None
    audio_vae_path: Path | None = None
    output_dir: Path | None = None
    video_column: str | None = None
    caption_column: str | None = None
    batch_size: int = 1
    device: str | None = None
    vae_tiling: bool = False
    crop_mode: str = "center"
    seed: int = 0
    lora_trigger: str | None = None
    remove_llm_prefixes: bool = False
    skip_audio: bool = False
    audio_durations: tuple[float, ...] = ()
    reference_downscale_factor: int = 1
    reference_temporal_scale_factor: int = 1
    decode: bool = False
    overwrite: bool = False
    load_text_encoder_in_8bit: bool = False

    def manifest(self) -> dict:
        """The parameters that decide what the outputs contain (recorded in preprocessing.json)."""
        data = asdict(self)
        # How the work runs (device, batch, 8-bit Gemma's numerics, like the device's) is not recorded.
        for name in ("device", "batch_size", "decode", "overwrite", "output_dir", "resolution_buckets",
                     "load_text_encoder_in_8bit"):  # fmt: skip
            data.pop(name)
        data["resolution_buckets"] = [str(b) for b in self.resolution_buckets]
        # Through JSON, so tuples compare equal to the lists a previous run's file holds.
        return json.loads(json.dumps(data, default=str))


def preprocess_dataset(dataset_path: str | Path, settings: PreprocessSettings, shard: Shard | None = None) -> RunReport:
    """Run every stage the dataset's columns call for; returns the report (also printed by the CLI)."""
    if settings.load_text_encoder_in_8bit:  # before reading anything
        require_gemma_8bit(resolve_device(shard_device(settings.device)), "--load-text-encoder-in-8bit")
    dataset = read_dataset(dataset_path)
    roles = resolve_roles(dataset.columns, {"video": settings.video_column, "caption": settings.caption_column})
    for role, column in sorted(roles.items()):
        logger.info("column %r -> %s", column, role)
    if "caption" not in roles:
        raise DatasetFileError(
            f"{dataset.path.name} has no caption column (columns: {list(dataset.columns)}); "
            "expected 'caption' or pass --caption-column"
        )
    video_col, audio_col = roles.get("video"), roles.get("audio")
    if video_col is None and audio_col is None:
        raise DatasetFileError(
            f"{dataset.path.name} has no media column (columns: {list(dataset.columns)}); "
            "expected 'video' (or legacy 'media_path') and/or 'audio'"
        )
    buckets = list(settings.resolution_buckets)
    if video_col is not None and not buckets:
        raise BucketError("--resolution-buckets is required: the dataset has a video column")
    ref_factors = (settings.reference_downscale_factor, settings.reference_temporal_scale_factor)
    if "reference_video" in roles:
        if min(ref_factors) < 1:
            raise BucketError(f"reference scale factors must be >= 1; got {ref_factors}")
        if max(ref_factors) > 1 and len(buckets) > 1:
            raise BucketError(
                "scaled references (--reference-downscale-factor / --reference-temporal-scale-factor > 1) need a "
                f"single resolution bucket; got {len(buckets)}: {';'.join(map(str, buckets))}"
            )
        for bucket in buckets:  # fail now, not after hours of encoding
            reference_bucket(bucket, *ref_factors)
    if audio_col is not None and video_col is None and not settings.audio_durations:
        raise BucketError("--audio-durations is required for an audio-only dataset (e.g. '2;4;8')")
    sources = ModelSources(settings.model_path, settings.video_vae_path, settings.audio_vae_path).check()
    if not Path(settings.text_encoder_path).exists():
        raise FileNotFoundError(f"--text-encoder-path {str(settings.text_encoder_path)!r} does not exist")
    # Single file + Gemma 3 folder, or the LTX-2.5 transformer file + packed Gemma 4 file: read (and the
    # encoder checked against the transformer's) before any encoding.
    caption_files = training_model_files(sources.checkpoint or settings.model_path, settings.text_encoder_path)
    # Audio is checked where a file other than a single checkpoint provides it (a clip without a track
    # needs no audio VAE, so a single file's is only built when a track is met).
    separate_audio = settings.audio_vae_path is not None or caption_files.layout is Layout.SPLIT
    needs_audio = separate_audio and (
        audio_col is not None or "reference_audio" in roles or (video_col is not None and not settings.skip_audio)
    )
    check_vae_files(
        sources.video_path() if video_col is not None else None,
        sources.audio_path() if needs_audio else None,
        grid=SpatioTemporalScaleFactors(TEMPORAL_MULTIPLE, SPATIAL_MULTIPLE, SPATIAL_MULTIPLE),
    )

    shard = shard or current_shard()
    out = Path(settings.output_dir) if settings.output_dir else dataset.root / ".precomputed"
    _check_manifest(out, settings)
    report = RunReport(items=len(shard.take(dataset.rows)))
    device = shard_device(settings.device)
    common = {"report": report, "overwrite": settings.overwrite, "shard": shard}
    key_columns = [c for c in (video_col, audio_col) if c is not None]

    compute_caption_features(
        dataset,
        roles["caption"],
        key_columns,
        out / pc.CONDITIONS,
        checkpoint=caption_files,
        text_encoder_path=settings.text_encoder_path,
        lora_trigger=settings.lora_trigger,
        strip_prefixes=settings.remove_llm_prefixes,
        batch_size=settings.batch_size,
        device=device,
        load_in_8bit=settings.load_text_encoder_in_8bit,
        **common,
    )
    with LazyModels(sources, device=device) as models:
        video_opts = {"vae_tiling": settings.vae_tiling, "crop_mode": settings.crop_mode, "seed": settings.seed}
        if video_col is not None:
            compute_video_latents(dataset, video_col, buckets, out / pc.LATENTS, models, **video_opts, **common)
        if "reference_video" in roles and video_col is not None:
            compute_reference_latents(
                dataset,
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
        if "video_mask" in roles and video_col is not None:
            compute_video_masks(
                dataset, roles["video_mask"], video_col, out / pc.LATENTS, out / pc.VIDEO_MASKS, **common
            )
        audio_sources: list[str] = [audio_col] if audio_col else []
        if video_col is not None and not settings.skip_audio:
            audio_sources.append(video_col)  # a video's own track when the row names no audio file
        audio_opts = {
            "key_columns": key_columns,
            "video_column": video_col,
            "latents_dir": out / pc.LATENTS,
            "durations": settings.audio_durations,
        }
        if audio_sources:
            compute_audio_latents(dataset, audio_sources, out / pc.AUDIO_LATENTS, models, **audio_opts, **common)
        if "reference_audio" in roles:
            compute_audio_latents(
                dataset,
                roles["reference_audio"],
                out / pc.REFERENCE_AUDIO_LATENTS,
                models,
                stage="reference audio",
                **audio_opts,
                **common,
            )
        if "audio_mask" in roles:
            compute_audio_masks(
                dataset, roles["audio_mask"], key_columns, out / pc.AUDIO_LATENTS, out / pc.AUDIO_MASKS, **common
            )
        if settings.decode and shard.is_main:
            decode_video_folder(
                out / pc.LATENTS,
                out / pc.DECODED_VIDEOS,
                models,
                report=report,
                vae_tiling=settings.vae_tiling,
                overwrite=settings.overwrite,
            )
            if (out / pc.REFERENCE_LATENTS).is_dir():
                decode_video_folder(
                    out / pc.REFERENCE_LATENTS,
                    out / pc.DECODED_REFERENCE_VIDEOS,
                    models,
                    report=report,
                    vae_tiling=settings.vae_tiling,
                    overwrite=settings.overwrite,
                    stage="decode reference",
                )
    if shard.is_main:
        pc.write_manifest(out, settings.manifest())
    logger.info("preprocessing finished: %d file(s) written under %s", report.total_written, out)
    return report


def _check_manifest(out: Path, settings: PreprocessSettings) -> None:
    """Warn when existing outputs came from other parameters and would be kept (no --overwrite)."""
    previous = pc.read_manifest(out)
    if previous is None or settings.overwrite:
        return
    current = settings.manifest()
    changed = sorted(k for k in set(previous) | set(current) if previous.get(k) != current.get(k))
    if changed:
        logger.warning(
            "%s holds outputs of a run with other settings (%s differ); existing samples are kept as they are. "
            "Pass --overwrite to recompute them.",
            out,
            ", ".join(changed),
        )


def parse_optional_buckets(spec: str | None) -> tuple[Bucket, ...]:
    from ltx_trainer.buckets import parse_buckets

    return tuple(parse_buckets(spec)) if spec else ()


def positive_factor(name: str, value: int) -> int:
    if value < 1:
        raise BucketError(f"{name} must be >= 1; got {value}")
    return value
