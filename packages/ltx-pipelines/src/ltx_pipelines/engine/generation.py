"""What a pipeline returns, and writing it to disk (video + sidecar) without leaving partial files."""

from __future__ import annotations

import importlib.metadata
import logging
import platform
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_pipelines.media import write_video
from ltx_pipelines.media.atomic_files import atomic_output, check_output_path, sidecar_path, write_json_atomic

logger = logging.getLogger(__name__)


@dataclass
class Generation:
    """Decoded output of a run: frames as an iterator of (f, H, W, 3) float chunks in [0, 1] (decoded
    lazily, so consuming them is when the VAE runs), the stereo waveform, and the latents of each stage."""

    frames: Iterator[torch.Tensor]
    num_frames: int
    height: int
    width: int
    frame_rate: float
    audio: torch.Tensor | None
    audio_sample_rate: int | None
    prompt: str
    latents: dict[str, torch.Tensor] = field(default_factory=dict)
    tiling: TilingConfig | None = None
    """The VAE decode layout the frames are decoded with (None: untiled), recorded in the sidecar."""


def _package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("ltx-core", "ltx-pipelines", "torch", "transformers", "av"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def describe_model_files(files: Mapping[str, Path | None]) -> dict[str, dict[str, Any] | None]:
    """Name and size of each model file (folders: total size), for the sidecar."""
    out: dict[str, dict[str, Any] | None] = {}
    for role, path in files.items():
        if path is None:
            out[role] = None
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
    model_files: Mapping[str, Path | None],
    overwrite: bool = False,
) -> Path:
    """Encode the video with its audio and write the `.json` sidecar beside it, as a pair.

    Both are written under temporary names and renamed only once the video is complete, the sidecar
    first: a failure while decoding or encoding leaves no new file and any existing ones unchanged,
    and a video never appears without its sidecar. Existing files are refused unless `overwrite`.
    """
    video_path = check_output_path(output_path, overwrite=overwrite)
    json_path = check_output_path(sidecar_path(video_path), overwrite=overwrite)
    # Described before the long encode so the sidecar shows the files the run started with.
    files = describe_model_files(model_files)
    sidecar_published = False
    try:
        with atomic_output(video_path, overwrite=overwrite) as video_tmp:
            written = write_video(
                video_tmp,
                generation.frames,
                fps=generation.frame_rate,
                audio=generation.audio,
                audio_sample_rate=generation.audio_sample_rate,
                overwrite=True,  # the temporary file atomic_output has just created
                expected_frames=generation.num_frames,
            )
            sidecar = {
                "output": video_path.name,
                "prompt": generation.prompt,
                "parameters": dict(parameters),
                "video": {
                    "num_frames": written.frames,
                    "height": written.height,
                    "width": written.width,
                    "frame_rate": generation.frame_rate,
                },
                "audio": None
                if generation.audio is None
                else {"sample_rate": generation.audio_sample_rate, "samples": written.audio_samples},
                "decode_tiling": None if generation.tiling is None else generation.tiling.to_dict(),
                "model_files": files,
                "versions": _package_versions(),
            }
            write_json_atomic(json_path, sidecar, overwrite=overwrite)
            sidecar_published = True
        # Leaving the block renamed the video into place.
    except BaseException:
        if sidecar_published:  # its video could not be put in place: a sidecar alone would mislead
            json_path.unlink(missing_ok=True)
        raise
    logger.info("wrote %s and %s", video_path, json_path.name)
    return video_path
