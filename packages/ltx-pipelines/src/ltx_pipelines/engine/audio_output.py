"""What an audio-only pipeline returns, and writing it (WAV + sidecar) as a pair without partial files."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_pipelines.engine.generation import _package_versions, describe_model_files
from ltx_pipelines.media import write_audio
from ltx_pipelines.media.atomic_files import atomic_output, check_output_path, sidecar_path, write_json_atomic

logger = logging.getLogger(__name__)


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
) -> Path:
    """Write the waveform as 16-bit stereo PCM `.wav` and its `.json` sidecar, as a pair: both appear
    (sidecar first) only once the WAV is complete; existing files are refused unless `overwrite`."""
    wav_path = check_output_path(output_path, overwrite=overwrite)
    json_path = check_output_path(sidecar_path(wav_path), overwrite=overwrite)
    files = describe_model_files(model_files)
    sidecar_published = False
    try:
        with atomic_output(wav_path, overwrite=overwrite) as tmp:
            write_audio(tmp, generation.audio, generation.sample_rate, overwrite=True)
            sidecar = {
                "output": wav_path.name,
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
            write_json_atomic(json_path, sidecar, overwrite=overwrite)
            sidecar_published = True
    except BaseException:
        if sidecar_published:
            json_path.unlink(missing_ok=True)
        raise
    logger.info("wrote %s and %s", wav_path, json_path.name)
    return wav_path
