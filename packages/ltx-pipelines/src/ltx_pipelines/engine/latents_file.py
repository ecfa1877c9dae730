"""`<output>.latents.safetensors`: a run's denoised latents with its record, to decode again later.

The command line writes it before decoding (beside the output, or where `save_latents_safely` finds
room) and removes it after a successful write unless `--save-latents`; after a failure or an
interruption it stays, and `python -m ltx_pipelines.decode --latents FILE --output-path OUT` turns it into
the same video and sidecar the run would have written. The file holds the final video (and audio)
latent, the decoder's noise state, and as safetensors metadata the sidecar's prompt, parameters and
model files plus the size, frame rate, tiling and dtype decoding used.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_core.devices import default_device, parse_dtype
from ltx_core.loader import CheckpointError, ModelFiles
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.final_latents import FinalLatents, Waveform
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.noise_sources import NoiseSource, SeededNoise
from ltx_pipelines.io.atomic_files import (
    OutputExistsError,
    apply_umask,
    atomic_output,
    json_text,
    numbered_path,
)

logger = logging.getLogger(__name__)

LATENTS_SUFFIX = ".latents.safetensors"
LATENTS_FORMAT = "ltx-pipelines/latents"
LATENTS_FORMAT_VERSION = "1"
_VIDEO_KEY, _AUDIO_KEY, _NOISE_STATE_KEY = "video_latent", "audio_latent", "decoder_noise_state"
AUDIO_LATENT_KEY = _AUDIO_KEY
"""The tensor of a latents file holding the audio latent (a file without it decodes no sound)."""
# The waveform a run ships instead of decoding its audio latent (a2vid's input track, DFR's cut audio).
_SHIPPED_AUDIO_KEY = "shipped_audio"
_MAX_NUMBERED = 10_000


class LatentsFileError(ValueError):
    """A file that is not a readable latents file of this format."""


@dataclass(frozen=True)
class RunRecord:
    """What the sidecar of a run says besides the stream facts: its prompt, parameters and model files
    (as `describe_model_files` gives them)."""

    prompt: str
    parameters: dict[str, Any]
    model_files: dict[str, Any]


def latents_path_for(video_path: str | Path) -> Path:
    """`clip.mp4` -> `clip.latents.safetensors`."""
    return Path(video_path).with_suffix(LATENTS_SUFFIX)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def save_latents(path: str | Path, final: FinalLatents, record: RunRecord, *, overwrite: bool = False) -> Path:
    """Write `final` and `record` to `path` atomically (an existing file is replaced only with `overwrite`)."""
    if final.video is None:
        raise ValueError("a latents file holds a video latent; these latents are of an audio-only run")
    tensors = {_VIDEO_KEY: final.video.detach().to("cpu").contiguous()}
    if final.audio is not None:
        tensors[_AUDIO_KEY] = final.audio.detach().to("cpu").contiguous()
    if final.shipped_audio is not None:
        tensors[_SHIPPED_AUDIO_KEY] = final.shipped_audio.samples.detach().to("cpu", torch.float32).contiguous()
    noise: dict[str, Any] = {"kind": "unknown"}
    if isinstance(final.noise, SeededNoise):
        noise = {"kind": "seeded", "seed": final.noise.seed}
        state = final.noise.generator_state()
        if state is not None:
            tensors[_NOISE_STATE_KEY] = state
    shape = final.shape
    # A set resolved from one path (a pipeline's checkpoint) is recorded as that path, as before it was resolved.
    checkpoint = final.checkpoint
    if isinstance(checkpoint, ModelFiles) and checkpoint.given is not None:
        checkpoint = checkpoint.given
    metadata = {
        "format": LATENTS_FORMAT,
        "format_version": LATENTS_FORMAT_VERSION,
        "prompt": record.prompt,
        "parameters": json_text(record.parameters),
        "model_files": json_text(record.model_files),
        "video": json.dumps(
            {"num_frames": shape.frames, "height": shape.height, "width": shape.width, "frame_rate": shape.fps}
        ),
        "tiling": json.dumps(None if final.tiling is None else final.tiling.to_dict()),
        "checkpoint": str(checkpoint.main_path if isinstance(checkpoint, ModelFiles) else checkpoint),
        # A set of component files (LTX-2.5) is recorded whole, so decoding finds each VAE again.
        "checkpoint_files": json.dumps(checkpoint.as_dict() if isinstance(checkpoint, ModelFiles) else None),
        "dtype": _dtype_name(final.placement.dtype),
        "device": str(final.placement.device),
        "noise": json.dumps(noise),
        "shipped_audio_sample_rate": json.dumps(
            None if final.shipped_audio is None else final.shipped_audio.sample_rate
        ),
    }
    with atomic_output(path, overwrite=overwrite) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
        apply_umask(tmp)  # safetensors recreates the file private
    return Path(path).expanduser().absolute()


def save_latents_beside(
    video_path: str | Path, final: FinalLatents, record: RunRecord, *, overwrite: bool = False
) -> Path:
    """Save beside `video_path` as `<stem>.latents.safetensors`; without `overwrite`, a taken name moves
    the file to the first free numbered one (`<stem>-1.latents.safetensors`), never over another file."""
    video_path = Path(video_path)
    if overwrite:
        return save_latents(latents_path_for(video_path), final, record, overwrite=True)
    for number in range(_MAX_NUMBERED):
        try:
            return save_latents(latents_path_for(numbered_path(video_path, number)), final, record)
        except OutputExistsError:
            continue
    raise OutputExistsError(f"no free name for the latents of {str(video_path)!r}")


def user_cache_latents_folder() -> Path:
    """`$XDG_CACHE_HOME/ltx-pipelines/latents` (default `~/.cache/ltx-pipelines/latents`)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "ltx-pipelines" / "latents"


def fallback_latents_folders() -> tuple[Path, ...]:
    """Where latents go when they do not fit beside the output: the system temp folder, then the user cache."""
    return (Path(tempfile.gettempdir()), user_cache_latents_folder())


def save_latents_safely(
    video_path: str | Path, final: FinalLatents, record: RunRecord, *, overwrite: bool = False
) -> Path | None:
    """Save the latents beside `video_path` (`save_latents_beside`); when that fails (a full disk, a
    read-only folder), in the first of `fallback_latents_folders` that takes them, saying where. None
    (with a warning) when no place takes them: they are a safeguard, the run goes on without them."""
    video_path = Path(video_path)
    places = (video_path.parent, *fallback_latents_folders())
    for i, folder in enumerate(places):
        try:
            path = save_latents_beside(folder / video_path.name, final, record, overwrite=overwrite and i == 0)
        except Exception as e:  # safetensors reports a full disk as its own error type, not OSError
            logger.warning("could not save the denoised latents in %s (%s)", folder, e)
            continue
        if i:
            logger.warning("the denoised latents did not fit beside %s; they are in %s", video_path, path)
        return path
    logger.warning("the denoised latents could not be saved anywhere; continuing without them")
    return None


def follow_video_name(latents: Path, video: Path) -> Path:
    """Rename kept latents beside the video after it when it went to a numbered name, unless that name is
    taken (latents kept in another folder stay where they are)."""
    if latents.parent != video.parent:
        return latents
    wanted = latents_path_for(video)
    if wanted == latents:
        return latents
    try:
        os.link(latents, wanted)
    except OSError:
        return latents
    latents.unlink()
    return wanted


@dataclass(frozen=True)
class LoadedLatents:
    """A latents file read back: what to decode and the record for the sidecar."""

    final: FinalLatents
    record: RunRecord
    recorded_checkpoint: Path | ModelFiles
    recorded_tiling: TilingConfig | None
    recorded_dtype: torch.dtype


def _metadata_json(path: Path, metadata: dict[str, str], key: str) -> Any:
    try:
        return json.loads(metadata[key])
    except (KeyError, json.JSONDecodeError) as e:
        raise LatentsFileError(f"latents file {str(path)!r} has no readable {key!r} entry ({e})") from None


def decodes_audio(keys: set[str]) -> bool:
    """Whether a latents file (its tensor names) holds an audio latent that decoding turns into sound with
    the audio VAE and vocoder (not when the run ships a waveform of its own instead)."""
    return _AUDIO_KEY in keys and _SHIPPED_AUDIO_KEY not in keys


def read_latents_header(path: str | Path) -> tuple[dict[str, str], set[str]]:
    """The metadata and tensor names of a latents file; LatentsFileError for any other file."""
    p = Path(path).expanduser()
    try:
        with safe_open(str(p), framework="pt") as f:
            metadata = dict(f.metadata() or {})
            keys = set(f.keys())
    except FileNotFoundError:
        raise LatentsFileError(f"latents file {str(p)!r} does not exist") from None
    except Exception as e:  # safetensors raises its own error types for files of other formats
        raise LatentsFileError(f"{str(p)!r} is not a safetensors file ({e})") from None
    if metadata.get("format") != LATENTS_FORMAT or _VIDEO_KEY not in keys:
        raise LatentsFileError(
            f"{str(p)!r} is not a latents file written by ltx_pipelines (expected metadata format={LATENTS_FORMAT!r} "
            f"and a {_VIDEO_KEY!r} tensor; such files are named *{LATENTS_SUFFIX})"
        )
    if metadata.get("format_version") != LATENTS_FORMAT_VERSION:
        raise LatentsFileError(
            f"latents file {str(p)!r} has format version {metadata.get('format_version')!r}; "
            f"this version reads {LATENTS_FORMAT_VERSION!r}"
        )
    return metadata, keys


def _checkpoint(value: str | Path | ModelFiles) -> Path | ModelFiles:
    return value if isinstance(value, ModelFiles) else Path(value).expanduser()


def _shipped_audio(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> Waveform | None:
    rate = json.loads(metadata.get("shipped_audio_sample_rate", "null"))
    if _SHIPPED_AUDIO_KEY not in tensors or rate is None:
        return None
    return Waveform(tensors[_SHIPPED_AUDIO_KEY], int(rate))


def load_latents(
    path: str | Path,
    *,
    checkpoint: str | Path | ModelFiles | None = None,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    tiling: TilingConfig | None = None,
) -> LoadedLatents:
    """Read a latents file. `checkpoint`, `dtype` and `tiling` default to what the run used (the same
    frames then come out; `TilingConfig.untiled()` decodes in one piece); `device` defaults to the
    best available."""
    p = Path(path).expanduser()
    metadata, keys = read_latents_header(p)
    with safe_open(str(p), framework="pt") as f:
        tensors = {key: f.get_tensor(key) for key in keys}
    video = _metadata_json(p, metadata, "video")
    saved_tiling_spec = _metadata_json(p, metadata, "tiling")
    noise_spec = _metadata_json(p, metadata, "noise")
    saved_tiling = None if saved_tiling_spec is None else TilingConfig.from_dict(saved_tiling_spec)
    saved_dtype = parse_dtype(metadata.get("dtype", "float32"))
    noise: NoiseSource
    if noise_spec.get("kind") == "seeded":
        noise = SeededNoise.resumed(int(noise_spec["seed"]), tensors.get(_NOISE_STATE_KEY))
    else:
        logger.warning("%s records no decoder noise; a timestep-conditioned decoder draws it from seed 0", p)
        noise = SeededNoise(0)
    recorded_checkpoint: Path | ModelFiles = Path(metadata.get("checkpoint", ""))
    recorded_files = json.loads(metadata.get("checkpoint_files", "null"))
    if recorded_files is not None:
        try:
            recorded_checkpoint = ModelFiles.from_dict(recorded_files)
        except CheckpointError as e:
            if checkpoint is None:
                raise LatentsFileError(f"the model files recorded in {str(p)!r} cannot be read: {e}") from None
    placement = Placement(device or default_device(), dtype or saved_dtype)
    final = FinalLatents(
        video=tensors[_VIDEO_KEY].to(placement.device),
        audio=tensors[_AUDIO_KEY].to(placement.device) if _AUDIO_KEY in tensors else None,
        shape=VideoPixelShape(
            1, int(video["num_frames"]), int(video["height"]), int(video["width"]), float(video["frame_rate"])
        ),
        checkpoint=_checkpoint(checkpoint) if checkpoint is not None else recorded_checkpoint,
        placement=placement,
        tiling=tiling if tiling is not None else saved_tiling,
        noise=noise,
        prompt=metadata.get("prompt", ""),
        shipped_audio=_shipped_audio(tensors, metadata),
    )
    record = RunRecord(
        prompt=metadata.get("prompt", ""),
        parameters=_metadata_json(p, metadata, "parameters"),
        model_files=_metadata_json(p, metadata, "model_files"),
    )
    return LoadedLatents(final, record, recorded_checkpoint, saved_tiling, saved_dtype)
