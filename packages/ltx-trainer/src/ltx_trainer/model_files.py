"""Which layout the trainer's model paths are in: the LTX-2 / 2.3 single file (+ Gemma 3 folder), or the
LTX-2.5 split set (transformer file + packed Gemma 4 file + video VAE file), as one `ModelFiles` value.

The trainer takes the same config fields for both (`model.model_path`, `model.text_encoder_path`,
`model.video_vae_path`), as the reference trainer does; what the files hold decides the layout, never
their names: a transformer file whose config has no `vae` section, or a text encoder that is a file (a
packed Gemma 4), is the split set.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ltx_core.loader import CheckpointError, ModelFiles, read_checkpoint_config, read_safetensors_header
from ltx_core.model.video_vae.vae_class import video_scale_factors
from ltx_core.types import SpatioTemporalScaleFactors

logger = logging.getLogger(__name__)


def is_component_transformer(model_path: str | Path) -> bool:
    """True for a transformer-only file (the LTX-2.5 split layout): a `transformer` config and no `vae`."""
    config = read_safetensors_header(model_path).metadata.get("config")
    return isinstance(config, dict) and isinstance(config.get("transformer"), dict) and "vae" not in config


def is_split_set(model_path: str | Path, text_encoder_path: str | Path | None = None) -> bool:
    if text_encoder_path is not None and Path(text_encoder_path).expanduser().is_file():
        return True
    return is_component_transformer(model_path)


def training_model_files(
    model_path: str | Path,
    text_encoder_path: str | Path | None = None,
    video_vae_path: str | Path | None = None,
    audio_vae_path: str | Path | None = None,
) -> ModelFiles:
    """The trainer's model paths as one value (the text encoder checked against the transformer's
    `gemma_source_checkpoint`, before anything is loaded)."""
    if is_split_set(model_path, text_encoder_path):
        return ModelFiles.split(
            transformer=model_path, text_encoder=text_encoder_path, video_vae=video_vae_path, audio_vae=audio_vae_path
        )
    return ModelFiles.single_file(model_path, gemma_root=text_encoder_path, video_vae=video_vae_path)


def video_compression(
    model_path: str | Path, video_vae_path: str | Path | None = None
) -> tuple[SpatioTemporalScaleFactors, Path | None]:
    """The video VAE's compression (time, height, width) from the metadata of `video_vae_path`, else of
    the single file's `vae` section (either VAE class), and the file it was read from. A transformer-only
    file with no VAE file given gets the released 8 x 32 x 32, with a warning naming the field."""
    for path in (video_vae_path, model_path):
        if path is None:
            continue
        try:
            vae = read_checkpoint_config(path, "vae")
        except CheckpointError:
            if path == video_vae_path:
                raise
            continue
        return video_scale_factors(vae), Path(path)
    default = SpatioTemporalScaleFactors()
    logger.warning(
        "%s holds no video VAE config: assuming the released compression %d x %d x %d (frames x height x width); "
        "set model.video_vae_path to the video VAE file to read it from its metadata",
        model_path,
        default.time,
        default.height,
        default.width,
    )
    return default, None


def check_vae_files(
    video_vae: Path | None, audio_vae: Path | None, *, grid: SpatioTemporalScaleFactors
) -> None:
    """Before any encoding: the files that must provide the VAEs do (a transformer-only file of the
    LTX-2.5 split set does not: the VAEs come from --video-vae-path / --audio-vae-path), and the video
    VAE's compression (from its metadata) is the grid the resolution buckets are checked against."""
    if video_vae is not None:
        try:
            vae = read_checkpoint_config(video_vae, "vae")
        except CheckpointError as e:
            raise CheckpointError(f"{e}; give the video VAE file with --video-vae-path") from None
        factors = video_scale_factors(vae)
        if factors != grid:
            raise CheckpointError(
                f"the video VAE {str(video_vae)!r} compresses {factors.time} x {factors.height} x {factors.width} "
                f"(frames x height x width); the resolution buckets are for {grid.time} x {grid.height} x {grid.width}"
            )
    if audio_vae is not None:
        try:
            read_checkpoint_config(audio_vae, "audio_vae")
        except CheckpointError as e:
            raise CheckpointError(f"{e}; give the audio VAE file with --audio-vae-path") from None
