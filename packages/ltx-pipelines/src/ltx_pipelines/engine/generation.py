"""What a pipeline returns, and writing it to disk (video + sidecar) without losing or half-writing it."""

from __future__ import annotations

import importlib.metadata
import logging
import platform
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltx_core.loader import ModelFiles
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.latents_file import RunRecord, save_latents_beside
from ltx_pipelines.io.atomic_files import (
    check_output_path,
    json_text,
    partial_file,
    publish_with_sidecar,
    remove_stale_partials,
    sidecar_path,
)
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
    """Decoded output of a run (what the decode step, `engine/decoding.py`, returns): the frames as
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
        target = check_output_target(path, overwrite=overwrite, checked_at_start=False)
        if keep_latents and self.final is None:
            raise ValueError("keep_latents: this Generation holds no final latents (it was not made by a pipeline)")
        remove_stale_partials(target.parent)
        record = self.run_record(parameters, model_files)
        video, sidecar = write_generation(
            self, target, parameters=record.parameters, model_files=record.model_files, overwrite=overwrite,
            audio=audio,
        )  # fmt: skip
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


def check_output_target(output_path: str | Path, *, overwrite: bool, checked_at_start: bool) -> Path:
    """The output path (absolute) and its sidecar's checked for writing. A run whose path was checked when
    it began (`checked_at_start`) accepts a name taken since: the writer then moves to a numbered one."""
    tolerate_existing = overwrite or checked_at_start
    target = check_output_path(output_path, overwrite=tolerate_existing)
    check_output_path(sidecar_path(target), overwrite=tolerate_existing)
    return target


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
    (`publish_with_sidecar`): a failure while decoding or encoding leaves no new file and any existing
    ones unchanged, and a video never appears without its sidecar. `audio=False` leaves the audio
    stream out (the sidecar then records none).
    """
    waveform = generation.audio if audio else None
    target = check_output_target(output_path, overwrite=overwrite, checked_at_start=checked_at_start)
    # Described before the long encode so the sidecar shows the files the run started with.
    files = describe_model_files(model_files)
    with partial_file(target) as tmp:
        written = encode_video(
            tmp,
            generation.iter_frames(),
            fps=generation.frame_rate,
            audio=waveform,
            audio_sample_rate=generation.audio_sample_rate if waveform is not None else None,
            container_suffix=target.suffix,
            expected_frames=generation.num_frames,
        )

        def sidecar_text(final_path: Path) -> str:
            return json_text(
                {
                    "output": final_path.name,
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
            )

        video, sidecar = publish_with_sidecar(tmp, target, sidecar_text, overwrite=overwrite)
    logger.info(
        "wrote %s (%d frames %dx%d at %s fps) and %s", video, written.frames, written.width, written.height,
        written.fps, sidecar.name,
    )  # fmt: skip
    return video, sidecar
