"""What a preprocessing run will do, worked out and checked before any model is loaded.

`plan_preprocessing` reads the metadata file, names the column roles, checks the buckets, the reference
scale factors and the model files, and returns a `PreprocessPlan`: a bad input fails here, in one line,
not after hours of encoding. The stages that carry the plan out are in `preprocessing.run`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from ltx_core.devices import resolve_device
from ltx_core.loader import Layout, ModelFiles
from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit
from ltx_core.types import SpatioTemporalScaleFactors
from ltx_trainer.model_files import check_vae_files, training_model_files
from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.buckets import (
    SPATIAL_MULTIPLE,
    TEMPORAL_MULTIPLE,
    Bucket,
    BucketError,
    parse_buckets,
    reference_bucket,
)
from ltx_trainer.preprocessing.dataset_file import DatasetFile, DatasetFileError, read_dataset, resolve_roles
from ltx_trainer.preprocessing.models import ModelSources
from ltx_trainer.preprocessing.sharding import Shard, current_shard, shard_device

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


@dataclass(frozen=True)
class PreprocessPlan:
    """The checked inputs of a run: the rows, which column plays which role, and where the outputs go."""

    dataset: DatasetFile
    roles: dict[str, str]
    buckets: list[Bucket]
    sources: ModelSources
    caption_files: ModelFiles
    out: Path
    shard: Shard

    @property
    def video_column(self) -> str | None:
        return self.roles.get("video")

    @property
    def audio_column(self) -> str | None:
        return self.roles.get("audio")

    @property
    def key_columns(self) -> list[str]:
        """The media columns that name a sample's output files (the video's, else the audio's)."""
        return [c for c in (self.video_column, self.audio_column) if c is not None]


def plan_preprocessing(
    dataset_path: str | Path, settings: PreprocessSettings, shard: Shard | None = None
) -> PreprocessPlan:
    """Every check a run needs before its first stage, in the order a user fixes them: columns, buckets and
    reference factors, then the model files."""
    if settings.load_text_encoder_in_8bit:  # before reading anything
        require_gemma_8bit(resolve_device(shard_device(settings.device)), "--load-text-encoder-in-8bit")
    dataset = read_dataset(dataset_path)
    roles = _column_roles(dataset, settings)
    buckets = _checked_buckets(roles, settings)
    sources, caption_files = _checked_model_files(roles, settings)
    shard = shard or current_shard()
    out = Path(settings.output_dir) if settings.output_dir else dataset.root / ".precomputed"
    _check_manifest(out, settings)
    return PreprocessPlan(dataset, roles, buckets, sources, caption_files, out, shard)


def _column_roles(dataset: DatasetFile, settings: PreprocessSettings) -> dict[str, str]:
    """Which column is the caption, the video, the audio ...; a caption and at least one medium are required."""
    roles = resolve_roles(dataset.columns, {"video": settings.video_column, "caption": settings.caption_column})
    for role, column in sorted(roles.items()):
        logger.info("column %r -> %s", column, role)
    if "caption" not in roles:
        raise DatasetFileError(
            f"{dataset.path.name} has no caption column (columns: {list(dataset.columns)}); "
            "expected 'caption' or pass --caption-column"
        )
    if roles.get("video") is None and roles.get("audio") is None:
        raise DatasetFileError(
            f"{dataset.path.name} has no media column (columns: {list(dataset.columns)}); "
            "expected 'video' (or legacy 'media_path') and/or 'audio'"
        )
    return roles


def _checked_buckets(roles: dict[str, str], settings: PreprocessSettings) -> list[Bucket]:
    """The resolution buckets, with the reference scale factors and the audio durations the columns need."""
    video_col, audio_col = roles.get("video"), roles.get("audio")
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
    return buckets


def _checked_model_files(roles: dict[str, str], settings: PreprocessSettings) -> tuple[ModelSources, ModelFiles]:
    """The VAE sources and the caption encoder's files, checked against each other before any encoding."""
    video_col, audio_col = roles.get("video"), roles.get("audio")
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
    return sources, caption_files


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
    return tuple(parse_buckets(spec)) if spec else ()


def positive_factor(name: str, value: int) -> int:
    if value < 1:
        raise BucketError(f"{name} must be >= 1; got {value}")
    return value
