"""What generating returns: a run's final latents and what decoding them takes, as one value.

Denoising is the expensive part of a run; decoding and writing come after it and can fail on their own
(out of memory, disk full, an encoder error). A `FinalLatents` holds everything the decode step
(`engine/decoding.py`) needs - the latents, the checkpoint with the VAE and vocoder, the placement, the
tiling and the noise source positioned at the decoder's first draw - so the command line can save it
before decoding, and decoding it again gives the same frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ltx_core.loader.lora import LoraSpec
from ltx_core.loader.model_files import ModelSource
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.noise_sources import NoiseSource


@dataclass(frozen=True)
class Waveform:
    """A decoded stereo waveform: (2, N) float32 samples in [-1, 1] at `sample_rate`."""

    samples: torch.Tensor
    sample_rate: int


@dataclass(frozen=True)
class FinalLatents:
    """A run's last video and audio latents, the latents of each stage, and what decoding them takes."""

    video: torch.Tensor | None
    """The final video latent; None for an audio-only run."""
    audio: torch.Tensor | None
    """The final audio latent; None for a run without audio."""
    shape: VideoPixelShape
    """The output size, length and frame rate (audio-only runs: a placeholder size with the duration)."""
    checkpoint: ModelSource
    """The model files holding the video VAE decoder, the audio decoder and the vocoder (one file, a folder or
    a set of component files)."""
    placement: Placement
    tiling: TilingConfig | None
    noise: NoiseSource
    """Positioned at the decoder's first draw; every decode draws from a fresh copy."""
    stage_latents: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """The latents each stage produced, by name (`stage_1.video_latent`, ...), for inspection and tests."""
    prompt: str = ""
    """The prompt as encoded (rewritten by Gemma with prompt enhancement)."""
    shipped_audio: Waveform | None = None
    """A waveform shipped as the output's sound instead of decoding `audio` (audio-to-video ships its input
    track, DFR its stage-1 audio cut to the video); a saved latents file keeps it, so decoding that file
    writes the same sound."""


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
