"""What an audio-only pipeline returns, and writing it (WAV + sidecar) as a pair without partial files."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_pipelines.engine.generation import _package_versions, check_output_target, describe_model_files
from ltx_pipelines.io import write_audio
from ltx_pipelines.io.atomic_files import (
    json_text,
    partial_file,
    publish_with_sidecar,
)

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
    checked_at_start: bool = False,
) -> Path:
    """Write the waveform as 16-bit stereo PCM `.wav` and its `.json` sidecar as a pair, the way video
    outputs are published (`publish_with_sidecar`): nothing appears until the WAV is complete, an
    existing pair is refused unless `overwrite`, a name taken meanwhile moves the pair to a numbered name."""
    target = check_output_target(output_path, overwrite=overwrite, checked_at_start=checked_at_start)
    files = describe_model_files(model_files)
    with partial_file(target) as tmp:
        write_audio(tmp, generation.audio, generation.sample_rate, overwrite=True)

        def sidecar_text(final_path: Path) -> str:
            return json_text(
                {
                    "output": final_path.name,
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
            )

        wav, sidecar = publish_with_sidecar(tmp, target, sidecar_text, overwrite=overwrite)
    logger.info("wrote %s and %s", wav, sidecar.name)
    return wav
