"""End-to-end conversions between waveforms and audio latents."""

from __future__ import annotations

import torch

from ltx_core.model.audio_vae.audio_vae import AudioDecoder, AudioEncoder
from ltx_core.model.audio_vae.mel import AudioPreprocessor
from ltx_core.model.audio_vae.vocoder import Vocoder


def encode_audio(
    waveform: torch.Tensor,
    sample_rate: int,
    encoder: AudioEncoder,
    preprocessor: AudioPreprocessor | None = None,
) -> torch.Tensor:
    """Waveform (B, 1 or 2, N) at `sample_rate` Hz -> normalised latent (B, 8, T, 16).

    The log-mel is computed in float32 on the encoder's device (with the encoder's own front-end settings
    unless `preprocessor` is given), then cast to the encoder's dtype.
    """
    if preprocessor is None:
        preprocessor = AudioPreprocessor.from_config(encoder.config)
    device = encoder.conv_in.conv.weight.device
    mel = preprocessor(waveform.to(device), sample_rate)
    return encoder(mel)


def decode_audio(latent: torch.Tensor, decoder: AudioDecoder, vocoder: Vocoder) -> torch.Tensor:
    """Normalised latent (B, 8, T, 16) -> float32 stereo waveform (B, 2, N) at `vocoder.output_sample_rate`."""
    if decoder.config.mel_bins != vocoder.mel_bins or decoder.config.out_ch != 2:
        raise ValueError(
            f"audio decoder writes {decoder.config.out_ch} x {decoder.config.mel_bins}-bin log-mels, "
            f"the vocoder reads stereo {vocoder.mel_bins}-bin log-mels"
        )
    mel = decoder(latent)
    return vocoder(mel)
