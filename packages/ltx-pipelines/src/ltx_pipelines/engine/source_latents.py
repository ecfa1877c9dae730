"""Latents of user media: an audio track or a source video, VAE-encoded once with one encoder load.

Audio-to-video freezes the encoded audio; retake starts from the encoded source video and audio.
The latents are conformed to the target grid's length (cut, or padded with zeros), as the reference
does, so a clip slightly shorter or longer than the target still fits.
"""

from __future__ import annotations

import torch

from ltx_core.loader.model_files import ModelSource
from ltx_core.model.audio_vae import AUDIO_ENCODER, encode_audio
from ltx_core.model.video_vae import VIDEO_ENCODER
from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig
from ltx_pipelines.engine.model_loading import Placement, loaded

# Source videos are encoded in 768-pixel spatial tiles (all frames at once), as the reference does.
SOURCE_ENCODE_TILING = TilingConfig(frames=AxisTiling(), height=AxisTiling(768, 64), width=AxisTiling(768, 64))


def conform_latent_frames(latent: torch.Tensor, frames: int) -> torch.Tensor:
    """`latent` (B, C, T, ...) cut or zero-padded along T to exactly `frames` steps."""
    have = latent.shape[2]
    if have >= frames:
        return latent[:, :, :frames]
    pad = latent.new_zeros((*latent.shape[:2], frames - have, *latent.shape[3:]))
    return torch.cat([latent, pad], dim=2)


def encode_audio_latent(
    checkpoint: ModelSource, placement: Placement, waveform: torch.Tensor, sample_rate: int, *, latent_frames: int
) -> torch.Tensor:
    """Waveform (1, 1 or 2, N) or (channels, N) at `sample_rate` -> normalised audio latent (1, 8, T, 16)
    with T = `latent_frames` (resampled to the encoder's rate and mixed to stereo by its front end)."""
    wave = waveform if waveform.dim() == 3 else waveform.unsqueeze(0)
    if wave.shape[1] > 2:  # more than stereo: the VAE takes two channels; fold the rest in by averaging
        wave = wave.mean(dim=1, keepdim=True)
    with loaded(AUDIO_ENCODER, checkpoint, placement) as encoder, torch.no_grad():
        latent = encode_audio(wave.float(), sample_rate, encoder)
    return conform_latent_frames(latent.to(placement.dtype), latent_frames)


def encode_video_latent(
    checkpoint: ModelSource, placement: Placement, pixels: torch.Tensor, *, latent_frames: int
) -> torch.Tensor:
    """Pixels (1, 3, F, H, W) in [-1, 1] -> normalised video latent (1, 128, T, H/32, W/32), T = `latent_frames`."""
    with loaded(VIDEO_ENCODER, checkpoint, placement) as encoder, torch.no_grad():
        latent = encoder.encode_tiled(pixels.to(device=placement.device, dtype=placement.dtype), SOURCE_ENCODE_TILING)
    return conform_latent_frames(latent, latent_frames)
