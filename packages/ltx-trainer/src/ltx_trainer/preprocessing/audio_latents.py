"""Audio (a video's own track or a separate file) -> audio VAE latents under `.precomputed/audio_latents/`.

How long each sample's audio is:
- with video latents for the row: the encoded clip's span, pixel frames / the clip's real fps
  (padded with silence or trimmed to it), so audio and video cover the same time;
- otherwise (audio-only data): the longest `--audio-durations` bucket the file covers; files
  shorter than every bucket are dropped and reported.

A video without an audio track is not dropped: it gets the latents of silence over its span with
`has_audio` = 0, and training masks the audio loss of such samples (they train the video only).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from ltx_pipelines.io import MediaError
from ltx_trainer.preprocessing.buckets import choose_duration
from ltx_trainer.preprocessing.dataset_file import DatasetFile
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.media import StereoAudio, is_image, read_stereo_audio
from ltx_trainer.preprocessing.models import LazyModels, encode_waveform
from ltx_trainer.preprocessing.precomputed import HAS_AUDIO, audio_latent_tensors, load_sample, sample_path, save_sample
from ltx_trainer.preprocessing.sample_loop import rows_with
from ltx_trainer.preprocessing.sharding import Shard

logger = logging.getLogger(__name__)

NO_TRACK_STAGE = "audio (no track)"
"""The report's stage for clips without an audio track (silent placeholders, trained video-only)."""
_SILENCE_RATE = 48_000


def clip_span_seconds(latents_file: Path) -> float:
    """The time a video latents file covers: its pixel frames over its frame rate."""
    sample = load_sample(latents_file)
    frames = sample.meta_json("pixel_frames")
    fps = sample.meta_json("fps")
    if frames is None or fps is None:  # a reference .pt file: latent frames and fps tensors only
        frames = (int(sample.scalar("num_frames")) - 1) * 8 + 1
        fps = sample.scalar("fps")
    return float(frames) / float(fps)


def compute_audio_latents(
    dataset: DatasetFile,
    audio_columns: str | Sequence[str],
    output_dir: str | Path,
    models: LazyModels,
    *,
    report: RunReport,
    key_columns: str | Sequence[str] | None = None,
    video_column: str | None = None,
    latents_dir: str | Path | None = None,
    durations: Sequence[float] | None = None,
    overwrite: bool = False,
    shard: Shard | None = None,
    stage: str = "audio",
) -> None:
    """Encode each row's audio: the first of `audio_columns` with a value (e.g. `audio`, then the
    video's own track), named after the first of `key_columns` with a value.

    A row with a `video_column` value is matched to its video latents in `latents_dir` (and skipped
    when they are missing: its video stage reported why); other rows use the `durations` buckets.
    """
    out_root = Path(output_dir)
    for item in rows_with(dataset, audio_columns, key_column=key_columns, shard=shard, desc=f"{stage} latents"):
        target = sample_path(out_root, "", item.key)
        if target.exists() and not overwrite:
            report.skip(stage)
            continue
        media = dataset.media_path(item.value)
        if is_image(media):
            continue  # an image sample has no sound; nothing to drop
        has_video = video_column is not None and item.row.get(video_column) is not None
        try:
            if has_video:
                video_file = sample_path(latents_dir, "", item.key) if latents_dir is not None else None
                if video_file is None or not video_file.exists():
                    logger.info("no video latents for %s; skipping its audio", item.key)
                    continue
                seconds = clip_span_seconds(video_file)
                audio = read_stereo_audio(media, max_duration=seconds)
            else:
                bucketed = _audio_in_duration_bucket(media, durations)
                if isinstance(bucketed, str):
                    report.drop(stage, item.value, bucketed)
                    continue
                audio, seconds = bucketed
        except MediaError as e:
            if "has no audio track" not in str(e):
                report.drop(stage, item.value, f"unreadable: {e}")
            elif has_video and stage == "audio":
                _write_silent_placeholder(target, item.value, seconds, models)
                logger.warning("%s has no audio track: its sample trains the video only (audio loss masked)", media)
                report.wrote(NO_TRACK_STAGE)
            else:
                report.drop(stage, item.value, "no audio track")
            continue
        fitted = audio.fitted(seconds)
        latents = encode_waveform(models.audio_encoder(), fitted.waveform, fitted.sample_rate)
        meta = {"source": item.value, "duration": seconds, "source_sample_rate": audio.sample_rate}
        save_sample(target, audio_latent_tensors(latents, seconds), meta)
        report.wrote(stage)


def _audio_in_duration_bucket(media: Path, durations: Sequence[float] | None) -> tuple[StereoAudio, float] | str:
    """An audio-only sample's track and the duration bucket it is cut to, or the reason it is dropped."""
    if not durations:
        return "audio-only sample, but no --audio-durations buckets were given"
    audio = read_stereo_audio(media)
    chosen = choose_duration(durations, audio.duration)
    if chosen is None:
        return f"too short: {audio.duration:.2f} s (the shortest duration bucket is {min(durations):g} s)"
    return audio, chosen


def _write_silent_placeholder(target: Path, source: str, seconds: float, models: LazyModels) -> None:
    """Silence's latents (so the sample has audio tokens of the right length) marked `has_audio` = 0."""
    silence = torch.zeros(2, round(seconds * _SILENCE_RATE))
    latents = encode_waveform(models.audio_encoder(), silence, _SILENCE_RATE)
    tensors = {**audio_latent_tensors(latents, seconds), HAS_AUDIO: torch.tensor(False)}
    save_sample(target, tensors, {"source": source, "duration": seconds, "audio_track": "none"})
