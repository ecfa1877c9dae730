"""What a pipeline returns, and writing it to disk (video + sidecar) without losing or half-writing it.

The decode step: a run's final latents (`FinalLatents`) into frames and a waveform.

It sits between generating (which returns the latents as a value) and writing (which only encodes
decoded data and never builds a model). The video decoder and the audio decoder + vocoder are built
here, used, and freed before this returns: the frames come back decoded, as (f, H, W, 3) float chunks
in [0, 1] on the CPU, the form the decoder gives them in (tile band by tile band).

The multi-GPU decode is a variant of the same step (`distributed=True`): the tiles are spread over the
ranks of the process group and blended on rank 0, which gets the frames; the other ranks get none.

`<output>.latents.safetensors`: a run's denoised latents with its record, to decode again later.

The command line writes it before decoding (beside the output, or where `save_latents_safely` finds
room) and removes it after a successful write unless `--save-latents`; after a failure or an
interruption it stays, and `python -m ltx_pipelines.decode --latents FILE --output-path OUT` turns it into
the same video and sidecar the run would have written. The file holds the final video (and audio)
latent, the decoder's noise state, and as safetensors metadata the sidecar's prompt, parameters and
model files plus the size, frame rate, tiling and dtype decoding used.

What an audio-only pipeline returns, and writing it (WAV + sidecar) as a pair without partial files.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import platform
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open

from ltx_core.devices import default_device, parse_dtype
from ltx_core.loader import CheckpointError, ModelFiles
from ltx_core.loader.lora import LoraSpec
from ltx_core.loader.model_files import ModelSource
from ltx_core.model.audio_vae import AudioDecoder, decode_audio
from ltx_core.model.video_vae import DiffusionVideoDecoder, VideoDecoder
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.no_grad_iteration import no_grad_items
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, NoiseSource, SeededNoise, Waveform, fork_noise
from ltx_pipelines.engine.model_loading import Decoders, Placement, loaded_decoders
from ltx_pipelines.io import write_audio
from ltx_pipelines.io.atomic_files import output_with_sidecar, write_safetensors
from ltx_pipelines.io.video_writer import encode_video

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavedGeneration:
    """Where `Generation.save` put the result."""

    video: Path
    sidecar: Path
    latents: Path | None = None
    """The latents file, when kept (`keep_latents=True`)."""


@dataclass
class Generation:
    """Decoded output of a run (what the decode step, `engine/generation.py`, returns): the frames as
    (f, H, W, 3) float chunks in [0, 1] on the CPU, the stereo waveform, the latents of each stage and,
    from the pipelines, the final latents it was decoded from (`final`, to keep them with the video).

    Writing it (`save`, `write_generation`) only encodes these frames; it never builds a model.
    """

    frames: Sequence[torch.Tensor]
    num_frames: int
    height: int
    width: int
    frame_rate: float
    audio: torch.Tensor | None
    audio_sample_rate: int | None
    prompt: str
    latents: dict[str, torch.Tensor] = field(default_factory=dict)
    tiling: TilingConfig | None = None
    """The VAE decode layout the frames were decoded with (None: untiled), recorded in the sidecar."""
    final: FinalLatents | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    """The run's parameters for the sidecar (the CLI records every flag)."""
    model_files: dict[str, Any] = field(default_factory=dict)
    """Model files by role (paths, or descriptions as `describe_model_files` makes them)."""

    def __post_init__(self) -> None:
        # Any iterable of chunks is accepted; it is read once, here, so the frames can be used any number of times.
        self.frames = tuple(self.frames)

    def iter_frames(self) -> Iterator[torch.Tensor]:
        """The frame chunks, in order."""
        return iter(self.frames)

    def frames_array(self) -> np.ndarray:
        """All frames as a (F, H, W, 3) uint8 numpy array, e.g. for display."""
        if not self.frames:
            return np.zeros((0, self.height, self.width, 3), dtype=np.uint8)
        frames = torch.cat(list(self.frames))
        if not frames.is_floating_point():
            return frames.to(torch.uint8).numpy()
        return (frames.float().clamp(0.0, 1.0) * 255.0).round().to(torch.uint8).numpy()

    def run_record(
        self, parameters: Mapping[str, Any] | None = None, model_files: Mapping[str, Any] | None = None
    ) -> RunRecord:
        return RunRecord(
            prompt=self.prompt,
            parameters=dict(self.parameters if parameters is None else parameters),
            model_files=describe_model_files(self.model_files if model_files is None else model_files),
        )

    def save(
        self,
        path: str | Path,
        *,
        overwrite: bool = False,
        parameters: Mapping[str, Any] | None = None,
        model_files: Mapping[str, Any] | None = None,
        keep_latents: bool = False,
        audio: bool = True,
    ) -> SavedGeneration:
        """Write the video (H.264 + AAC) and its `.json` sidecar, the way the command line does.

        Existing files are refused unless `overwrite` (then video and sidecar are replaced as a pair).
        A file appearing at `path` while this runs moves the result to a free numbered name.
        `keep_latents`: also write the final latents to `<stem>.latents.safetensors` (named after the
        video), for `python -m ltx_pipelines.decode --latents ...` to decode again later (e.g. with another
        tiling). `parameters` / `model_files` default to the Generation's own. `audio=False` writes the
        video without its audio stream.
        """
        if keep_latents and self.final is None:
            raise ValueError("keep_latents: this Generation holds no final latents (it was not made by a pipeline)")
        record = self.run_record(parameters, model_files)
        video, sidecar = write_generation(
            self, path, parameters=record.parameters, model_files=record.model_files, overwrite=overwrite, audio=audio
        )
        latents = None
        if keep_latents and self.final is not None:
            latents = save_latents_beside(video, self.final, record, overwrite=overwrite)
            logger.info("kept the latents in %s", latents)
        return SavedGeneration(video=video, sidecar=sidecar, latents=latents)


def _package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("ltx-core", "ltx-pipelines", "torch", "transformers", "av"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def describe_model_files(files: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Name and size of each model file (folders: total size), for the sidecar. Entries that are
    descriptions already (read back from a latents file) are kept as they are."""
    out: dict[str, dict[str, Any] | None] = {}
    for role, path in files.items():
        if path is None or isinstance(path, Mapping):
            out[role] = None if path is None else dict(path)
            continue
        if isinstance(path, ModelFiles) and path.given is not None:
            path = path.given  # a set resolved from one path (a pipeline's checkpoint) is recorded as that path
        if isinstance(path, ModelFiles):  # a set of model files: its layout and each component's files
            out[role] = path.as_dict()
            continue
        p = Path(path)
        size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
        out[role] = {"name": p.name, "path": str(p), "bytes": size}
    return out


def write_generation(
    generation: Generation,
    output_path: str | Path,
    *,
    parameters: Mapping[str, Any],
    model_files: Mapping[str, Any],
    overwrite: bool = False,
    audio: bool = True,
    checked_at_start: bool = False,
) -> tuple[Path, Path]:
    """Encode the video with its audio and write the `.json` sidecar beside it, as a pair; return both.

    The video is encoded under a temporary name and published with its sidecar only once complete
    (`output_with_sidecar`): a failure while encoding leaves no new file and any existing ones unchanged,
    and a video never appears without its sidecar. `audio=False` leaves the audio stream out (the sidecar
    then records none).
    """
    # Described before the long encode so the sidecar shows the files the run started with.
    files = describe_model_files(model_files)
    waveform = generation.audio if audio else None
    with output_with_sidecar(output_path, overwrite=overwrite, checked_at_start=checked_at_start) as output:
        written = encode_video(
            output.temporary,
            generation.iter_frames(),
            fps=generation.frame_rate,
            audio=waveform,
            audio_sample_rate=generation.audio_sample_rate if waveform is not None else None,
            container_suffix=output.target.suffix,
            expected_frames=generation.num_frames,
        )
        output.sidecar = {
            "prompt": generation.prompt,
            "parameters": dict(parameters),
            "video": {
                "num_frames": written.frames,
                "height": written.height,
                "width": written.width,
                "frame_rate": generation.frame_rate,
            },
            "audio": None
            if waveform is None
            else {"sample_rate": generation.audio_sample_rate, "samples": written.audio_samples},
            "decode_tiling": None if generation.tiling is None else generation.tiling.to_dict(),
            "model_files": files,
            "versions": _package_versions(),
        }
    video, sidecar = output.published, output.published_sidecar
    assert video is not None and sidecar is not None
    logger.info(
        "wrote %s (%d frames %dx%d at %s fps) and %s", video, written.frames, written.width, written.height,
        written.fps, sidecar.name,
    )  # fmt: skip
    return video, sidecar


def decode_waveform(final: FinalLatents) -> Waveform | None:
    """The run's sound: the shipped waveform when the run has one, else the audio latent decoded (the
    vocoder always runs in float32); None for a run without audio."""
    if final.shipped_audio is not None or final.audio is None:
        return final.shipped_audio
    with loaded_decoders(final.checkpoint, final.placement, video=False, audio=True) as decoders:
        return _waveform(decoders, final.audio)


def decode_audio_waveform(decoder: AudioDecoder, vocoder: torch.nn.Module, latent: torch.Tensor) -> torch.Tensor:
    """(2, N) float32 waveform at the vocoder's output rate, for a batch-1 audio latent."""
    with torch.no_grad():
        waveform = decode_audio(latent.to(next(decoder.parameters()).dtype), decoder, vocoder)
    return waveform[0].float()


def _waveform(decoders: Decoders, latent: torch.Tensor) -> Waveform:
    assert decoders.audio is not None and decoders.vocoder is not None
    samples = decode_audio_waveform(decoders.audio, decoders.vocoder, latent)
    return Waveform(samples, int(decoders.vocoder.output_sample_rate))


AnyVideoDecoder = VideoDecoder | DiffusionVideoDecoder


def decoder_noise(
    decoder: VideoDecoder, latent: torch.Tensor, tiling: TilingConfig | None, noise: NoiseSource
) -> list[torch.Tensor] | None:
    """One noise per decoded tile for a timestep-conditioned decoder (drawn last, named decoder.<i>)."""
    if not decoder.timestep_conditioning:
        return None
    draws = []
    for i, tile in enumerate(decoder.tile_layout(latent.shape, tiling)):
        tile_shape = latent[(slice(None), slice(None), *tile.source)].shape
        draws.append(noise(f"decoder.{i}", tile_shape, device=latent.device, dtype=latent.dtype))
    return draws


def decode_video_frames(
    decoder: AnyVideoDecoder, latent: torch.Tensor, tiling: TilingConfig | None, noise: NoiseSource
) -> Iterator[torch.Tensor]:
    """Chunks of (f, H, W, 3) float frames in [0, 1], decoded tile band by tile band.

    The LTX-2.5 diffusion decoder draws its canvas noise from `noise` itself (draw `decoder.0`, after
    every stage's draws); with no `tiling` its tiles are fitted to the device's free memory."""
    if isinstance(decoder, DiffusionVideoDecoder):
        if tiling is None:
            try:
                tiling = decoder.recommended_tiling(latent.shape, latent.device)
            except ValueError as e:  # the device does not report its free memory: decode untiled
                logger.info("diffusion VAE decode untiled: %s", e)
        yield from no_grad_items(decoder.decode_video(latent, tiling, noise=noise))
        return
    tile_noise = decoder_noise(decoder, latent, tiling, noise)
    yield from no_grad_items(decoder.decode_video(latent, tiling, noise=tile_noise))


def _frame_chunks(
    decoder: AnyVideoDecoder, latent: torch.Tensor, tiling: TilingConfig | None, noise: NoiseSource, distributed: bool
) -> Iterator[torch.Tensor]:
    """`decode_video_frames`, or over the ranks of the process group (`distributed`: rank 0 gets the frames)."""
    if not distributed:
        yield from decode_video_frames(decoder, latent, tiling, noise)
        return
    from ltx_core.model.video_vae.decoder import to_rgb_frames
    from ltx_core.multigpu import distributed_decode

    if isinstance(decoder, DiffusionVideoDecoder):
        # Every rank runs stages 1-3 and draws the canvas noise (`noise` is forked alike on every rank).
        if tiling is None:
            tiling = distributed_decode.agreed_diffusion_tiling(decoder, latent)
        chunks = distributed_decode.decode_diffusion_tiled_distributed(decoder, latent, tiling, noise)
    else:
        # Every rank draws the same per-tile noise, in tile order, as the single-process decode does.
        tile_noise = decoder_noise(decoder, latent, tiling, noise)
        chunks = distributed_decode.decode_tiled_distributed(decoder, latent, tiling, noise=tile_noise)
    for chunk in no_grad_items(chunks):
        yield to_rgb_frames(chunk)


def video_frame_chunks(
    checkpoint: ModelSource,
    placement: Placement,
    latent: torch.Tensor,
    tiling: TilingConfig | None,
    noise: NoiseSource,
    *,
    distributed: bool = False,
) -> Iterator[torch.Tensor]:
    """(f, H, W, 3) float frame chunks as the decoder gives them, drawing the decoder's noise from `noise`;
    the decoder is built when the first chunk is asked for and freed when the iteration ends."""
    with loaded_decoders(checkpoint, placement, video=True, audio=False) as decoders:
        assert decoders.video is not None
        yield from _frame_chunks(decoders.video, latent, tiling, noise, distributed)


def decode_video_generation(final: FinalLatents, *, distributed: bool = False) -> Generation:
    """The decoded video and its sound. `distributed`: decode tile-parallel over the process group (every
    rank must call it; rank 0 gets the frames, the others an empty tuple)."""
    if final.video is None:
        raise ValueError("these latents hold no video (an audio-only run): decode them with decode_audio_generation")
    noise = fork_noise(final.noise)  # a copy, so the same latents decode to the same frames again
    # The sound first, its decoder and vocoder freed before the video decoder is built: the decode step's
    # peak is the larger of the two, as the memory estimate counts it (22B: 0.6 GB audio, 0.8 GB video).
    waveform = decode_waveform(final)
    with loaded_decoders(final.checkpoint, final.placement, video=True, audio=False) as decoders:
        assert decoders.video is not None
        chunks = _frame_chunks(decoders.video, final.video, final.tiling, noise, distributed)
        frames = tuple(chunk.detach().to("cpu") for chunk in chunks)
    shape = final.shape
    return Generation(
        frames=frames,
        num_frames=shape.frames,
        height=shape.height,
        width=shape.width,
        frame_rate=shape.fps,
        audio=None if waveform is None else waveform.samples,
        audio_sample_rate=None if waveform is None else waveform.sample_rate,
        prompt=final.prompt,
        latents=dict(final.stage_latents),
        tiling=final.tiling,
        final=final,
        model_files={"checkpoint": final.checkpoint},
    )


def decode_audio_generation(final: FinalLatents) -> AudioGeneration:
    """The decoded waveform of an audio-only run."""
    waveform = decode_waveform(final)
    if waveform is None:
        raise ValueError("these latents hold no audio")
    return AudioGeneration(
        audio=waveform.samples, sample_rate=waveform.sample_rate, prompt=final.prompt, latents=dict(final.stage_latents)
    )


def decode_latents(final: FinalLatents, *, distributed: bool = False) -> Generation | AudioGeneration:
    """A video run's `Generation`, or an audio-only run's `AudioGeneration`."""
    if final.video is None:
        return decode_audio_generation(final)
    return decode_video_generation(final, distributed=distributed)


LATENTS_SUFFIX = ".latents.safetensors"


LATENTS_FORMAT = "ltx-pipelines/latents"


LATENTS_FORMAT_VERSION = "1"


_VIDEO_KEY, _AUDIO_KEY, _NOISE_STATE_KEY = "video_latent", "audio_latent", "decoder_noise_state"


AUDIO_LATENT_KEY = _AUDIO_KEY


"""The tensor of a latents file holding the audio latent (a file without it decodes no sound)."""


# The waveform a run ships instead of decoding its audio latent (a2vid's input track, DFR's cut audio).
_SHIPPED_AUDIO_KEY = "shipped_audio"


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


def save_latents(
    path: str | Path, final: FinalLatents, record: RunRecord, *, overwrite: bool = False, first_free: bool = False
) -> Path:
    """Write `final` and `record` to `path` atomically (an existing file is replaced only with `overwrite`;
    `first_free`: a taken name moves the file to the first free numbered one, `<stem>-1.latents.safetensors`)."""
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
    metadata = {  # the values that are not strings are stored as their JSON
        "format": LATENTS_FORMAT,
        "format_version": LATENTS_FORMAT_VERSION,
        "prompt": record.prompt,
        "parameters": record.parameters,
        "model_files": record.model_files,
        "video": {"num_frames": shape.frames, "height": shape.height, "width": shape.width, "frame_rate": shape.fps},
        "tiling": None if final.tiling is None else final.tiling.to_dict(),
        "checkpoint": str(checkpoint.main_path if isinstance(checkpoint, ModelFiles) else checkpoint),
        # A set of component files (LTX-2.5) is recorded whole, so decoding finds each VAE again.
        "checkpoint_files": checkpoint.as_dict() if isinstance(checkpoint, ModelFiles) else None,
        "dtype": _dtype_name(final.placement.dtype),
        "device": str(final.placement.device),
        "noise": noise,
        "shipped_audio_sample_rate": None if final.shipped_audio is None else final.shipped_audio.sample_rate,
    }
    first_free_suffix = LATENTS_SUFFIX if first_free else None
    return write_safetensors(path, tensors, metadata, overwrite=overwrite, first_free_suffix=first_free_suffix)


def save_latents_beside(
    video_path: str | Path, final: FinalLatents, record: RunRecord, *, overwrite: bool = False
) -> Path:
    """Save beside `video_path` as `<stem>.latents.safetensors`; without `overwrite`, a taken name moves
    the file to the first free numbered one (`<stem>-1.latents.safetensors`), never over another file."""
    return save_latents(latents_path_for(video_path), final, record, overwrite=overwrite, first_free=not overwrite)


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


@dataclass
class AudioGeneration:
    """Decoded output of an audio-only run: the stereo waveform (2, N) float32 in [-1, 1] at
    `sample_rate` (the vocoder's rate) and the latents of each stage."""

    audio: torch.Tensor
    sample_rate: int
    prompt: str
    latents: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.audio.shape[-1] / self.sample_rate


def write_audio_generation(
    generation: AudioGeneration,
    output_path: str | Path,
    *,
    parameters: Mapping[str, Any],
    model_files: Mapping[str, Path | None],
    overwrite: bool = False,
    checked_at_start: bool = False,
) -> Path:
    """Write the waveform as 16-bit stereo PCM `.wav` and its `.json` sidecar as a pair, the way video
    outputs are published (`output_with_sidecar`): nothing appears until the WAV is complete, an
    existing pair is refused unless `overwrite`, a name taken meanwhile moves the pair to a numbered name."""
    files = describe_model_files(model_files)
    with output_with_sidecar(output_path, overwrite=overwrite, checked_at_start=checked_at_start) as output:
        write_audio(output.temporary, generation.audio, generation.sample_rate, overwrite=True)
        output.sidecar = {
            "prompt": generation.prompt,
            "parameters": dict(parameters),
            "video": None,
            "audio": {
                "sample_rate": generation.sample_rate,
                "samples": int(generation.audio.shape[-1]),
                "channels": 2,
                "format": "pcm_s16le",
            },
            "model_files": files,
            "versions": _package_versions(),
        }
    wav, sidecar = output.published, output.published_sidecar
    assert wav is not None and sidecar is not None
    logger.info("wrote %s and %s", wav, sidecar.name)
    return wav


class NonFiniteLatentsError(RuntimeError):
    """The final latents hold NaN or Inf: decoding them cannot give a video, so they are neither saved nor
    decoded."""


def check_finite_latents(final: FinalLatents, loras: Sequence[LoraSpec] = ()) -> None:
    """Refuse final latents holding NaN or Inf, naming which latent and the likely cause: the transformer's
    output (LoRA files are checked for non-finite values when they are read, so a LoRA fused here can only
    be the cause through its strength or size, and is named)."""
    bad = [
        name
        for name, latent in (("video", final.video), ("audio", final.audio))
        if latent is not None and not bool(torch.isfinite(latent).all())
    ]
    if not bad:
        return
    fused = [lora for lora in loras if lora.strength != 0.0]
    cause = "the transformer produced non-finite latents"
    if fused:
        named = ", ".join(f"{str(lora.path)!r} at strength {lora.strength:g}" for lora in fused)
        cause += f" with the LoRA(s) {named} fused (run without them, or at a lower strength, to tell)"
    raise NonFiniteLatentsError(
        f"the final {' and '.join(bad)} latents hold NaN or Inf values: {cause}; nothing was saved or decoded"
    )


@dataclass(frozen=True)
class RunOutput:
    """Where and how a command-line run writes its result, and what its sidecar records."""

    path: Path
    overwrite: bool
    parameters: Mapping[str, Any]
    model_files: Mapping[str, Path | None]
    """Model files by role."""
    loras: Sequence[LoraSpec] = ()
    """The LoRAs fused into the transformer, named when the latents are not finite."""
    audio: bool = True
    """False: the video is written without its audio stream."""
    keep_latents: bool = False
    """Keep the latents file after a successful write (named after the output), instead of removing it."""


def write_decoded(decoded: Generation | AudioGeneration, output: RunOutput) -> Path:
    """Write a decoded run result and its sidecar as a pair (the path was checked when the run began: a file
    there now appeared during the run, and the result goes to a numbered name instead of being thrown away)."""
    parameters, files = output.parameters, output.model_files
    if isinstance(decoded, AudioGeneration):
        return write_audio_generation(
            decoded, output.path, parameters=parameters, model_files=files, overwrite=output.overwrite,
            checked_at_start=True,
        )  # fmt: skip
    video, _ = write_generation(
        decoded, output.path, parameters=parameters, model_files=files, overwrite=output.overwrite,
        audio=output.audio, checked_at_start=True,
    )  # fmt: skip
    return video


def save_run_latents(final: FinalLatents, output: RunOutput) -> Path | None:
    """A run's latents saved before decoding, so nothing is lost from here on: beside the output, else in the
    temp folder or the user cache (`save_latents_safely`). None for an audio-only run (the latents file and the
    decode command are for videos) or when no place took them."""
    if final.video is None:
        return None
    record = RunRecord(final.prompt, dict(output.parameters), describe_model_files(output.model_files))
    return save_latents_safely(output.path, final, record, overwrite=output.overwrite)


def write_run(
    final: FinalLatents,
    decode: Callable[[FinalLatents], Generation | AudioGeneration],
    output: RunOutput,
    on_latents_saved: Callable[[Path], object],
) -> Path:
    """A command-line run from its final latents to its output: refuse non-finite latents, save the latents
    (`save_run_latents`; `on_latents_saved` gets their path, for an error line to name), decode them
    (`decode`), write the output and its sidecar (`write_decoded`), then remove the latents unless kept."""
    check_finite_latents(final, output.loras)
    latents = save_run_latents(final, output)
    if latents is not None:
        on_latents_saved(latents)
    written = write_decoded(decode(final), output)
    if latents is not None and output.keep_latents:
        logger.info("kept the latents in %s", follow_video_name(latents, written))
    elif latents is not None:
        latents.unlink(missing_ok=True)
    return written
