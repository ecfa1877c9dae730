"""Audio side: waveform -> log-mel front end, the mel VAE (encoder / decoder) and the vocoders.

Shapes: waveform (B, 2, N); log-mel (B, 2, T, 64) at 100 frames/s (16 kHz, hop 160); latent
(B, 8, T', 16) at 25 steps/s, normalised with the per-channel statistics; the decoder returns
4 T' - 3 mel frames. The vocoder (24 kHz for LTX-2, 48 kHz with bandwidth extension for LTX-2.3)
always computes in float32 and returns float32 audio.
"""

from ltx_core.model.audio_vae.audio_vae import AudioDecoder, AudioEncoder, PerChannelStatistics
from ltx_core.model.audio_vae.config import AudioVAEConfig
from ltx_core.model.audio_vae.conversion import decode_audio, encode_audio
from ltx_core.model.audio_vae.hifigan import HifiGanVocoder
from ltx_core.model.audio_vae.mel import AudioPreprocessor, resample_waveform, slaney_mel_filterbank
from ltx_core.model.audio_vae.spec import (
    AUDIO_DECODER,
    AUDIO_ENCODER,
    VOCODER,
    audio_decoder_from_config,
    audio_encoder_from_config,
)
from ltx_core.model.audio_vae.vocoder import BandwidthExtensionVocoder, MelSTFT, Vocoder, vocoder_from_config
from ltx_core.model.audio_vae.vocoder_config import (
    BandwidthExtensionConfig,
    GeneratorConfig,
    vocoder_config_from_checkpoint,
)

__all__ = [
    "AUDIO_DECODER",
    "AUDIO_ENCODER",
    "VOCODER",
    "AudioDecoder",
    "AudioEncoder",
    "AudioPreprocessor",
    "AudioVAEConfig",
    "BandwidthExtensionConfig",
    "BandwidthExtensionVocoder",
    "GeneratorConfig",
    "HifiGanVocoder",
    "MelSTFT",
    "PerChannelStatistics",
    "Vocoder",
    "audio_decoder_from_config",
    "audio_encoder_from_config",
    "decode_audio",
    "encode_audio",
    "resample_waveform",
    "slaney_mel_filterbank",
    "vocoder_config_from_checkpoint",
    "vocoder_from_config",
]
