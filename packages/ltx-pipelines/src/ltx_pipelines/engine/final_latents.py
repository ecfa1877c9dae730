"""The denoised latents of a finished run and how to decode them, so decoding can be repeated or resumed.

Denoising is the expensive part of a run; decoding and encoding come after it and can fail on their
own (out of memory, disk full, an encoder error). A `FinalLatents` holds everything decoding needs:
the latents, the checkpoint with the VAE and vocoder, the tiling, the dtype and the noise source
positioned at the decoder's first draw, so decoding it again gives the same frames.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
from ltx_core.model.video_vae import VIDEO_DECODER
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.model_loading import Placement, loaded, release
from ltx_pipelines.engine.noise import NoiseSource, fork_noise
from ltx_pipelines.engine.stages import decode_audio_waveform, decode_video_frames


def decode_audio_from_checkpoint(
    checkpoint: Path, placement: Placement, audio_latent: torch.Tensor
) -> tuple[torch.Tensor, int]:
    """(2, N) float32 waveform and its sample rate; the vocoder always runs in float32."""
    with (
        loaded(AUDIO_DECODER, checkpoint, placement) as audio_decoder,
        loaded(VOCODER, checkpoint, placement, dtype=torch.float32) as vocoder,
    ):
        waveform = decode_audio_waveform(audio_decoder, vocoder, audio_latent)
        return waveform, int(vocoder.output_sample_rate)


def frames_from_checkpoint(
    checkpoint: Path,
    placement: Placement,
    video_latent: torch.Tensor,
    tiling: TilingConfig | None,
    noise: NoiseSource,
) -> Iterator[torch.Tensor]:
    """Frame chunks decoded lazily: the decoder loads when the first chunk is asked for and is freed
    after the last (or when the consumer stops early)."""
    decoder = None
    try:
        decoder = placement.build(VIDEO_DECODER, checkpoint, dtype=placement.dtype, device=placement.device)
        yield from decode_video_frames(decoder, video_latent, tiling, noise)
    finally:
        release(decoder)


@dataclass(frozen=True)
class FinalLatents:
    """A run's last video and audio latents and what decoding them takes."""

    video: torch.Tensor
    audio: torch.Tensor | None
    shape: VideoPixelShape
    """The output size, length and frame rate."""
    checkpoint: Path
    """The file holding the video VAE decoder, the audio decoder and the vocoder."""
    placement: Placement
    tiling: TilingConfig | None
    noise: NoiseSource
    """Positioned at the decoder's first draw; every decode draws from a fresh copy."""

    def decode_frames(self) -> Iterator[torch.Tensor]:
        """(f, H, W, 3) float chunks in [0, 1], decoded lazily (the same frames on every call)."""
        return frames_from_checkpoint(self.checkpoint, self.placement, self.video, self.tiling, fork_noise(self.noise))

    def decode_audio(self) -> tuple[torch.Tensor | None, int | None]:
        """The (2, N) waveform and its sample rate, or (None, None) for a run without audio."""
        if self.audio is None:
            return None, None
        return decode_audio_from_checkpoint(self.checkpoint, self.placement, self.audio)


# A failure after denoising travels as the original exception (its type says what went wrong: out of
# memory, disk full, ...); these attributes add what the caller needs to keep or report the result.
_FINAL_ATTRIBUTE = "ltx_final_latents"
_SAVED_ATTRIBUTE = "ltx_saved_latents"


def attach_final_latents(error: BaseException, final: FinalLatents) -> None:
    """Mark `error` as raised after denoising finished, carrying the latents that would otherwise be lost."""
    if getattr(error, _FINAL_ATTRIBUTE, None) is None:
        setattr(error, _FINAL_ATTRIBUTE, final)


def final_latents_of(error: BaseException) -> FinalLatents | None:
    return getattr(error, _FINAL_ATTRIBUTE, None)


def note_saved_latents(error: BaseException, path: Path) -> None:
    """Record on `error` where the latents of the failed run were saved (for the error report)."""
    setattr(error, _SAVED_ATTRIBUTE, path)


def saved_latents_of(error: BaseException) -> Path | None:
    return getattr(error, _SAVED_ATTRIBUTE, None)
