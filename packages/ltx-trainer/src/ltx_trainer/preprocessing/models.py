"""The ltx_core models preprocessing needs, built from a checkpoint only when there is work for them.

A rerun that finds every output present never loads a model. Video VAE halves follow the run's
dtype; the audio VAE and vocoder always run in float32 (the reference encodes audio in float32).
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ltx_core.devices import resolve_device
from ltx_core.loader import build_model, free_model_weights, read_checkpoint_config
from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER, AudioEncoder, decode_audio, encode_audio
from ltx_core.model.video_vae import (
    VIDEO_ENCODER,
    AxisTiling,
    TilingConfig,
    VideoDecoder,
    VideoEncoder,
    video_decoder_spec,
)

logger = logging.getLogger(__name__)

# --vae-tiling: 512-pixel spatial tiles with 128 pixels of overlap, time untiled (the reference's setting).
PREPROCESS_TILING = TilingConfig(frames=AxisTiling(), height=AxisTiling(512, 128), width=AxisTiling(512, 128))


def default_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on accelerators (the released weights' dtype), float32 on the CPU."""
    return torch.float32 if device.type == "cpu" else torch.bfloat16


@dataclass(frozen=True)
class ModelSources:
    """Where each model comes from: the single-file checkpoint unless a split file is given."""

    checkpoint: Path | None
    video_vae: Path | None = None
    audio_vae: Path | None = None

    def video_path(self) -> Path:
        path = self.video_vae or self.checkpoint
        if path is None:
            raise ValueError("no video VAE: pass --model-path (a single-file checkpoint) or --video-vae-path")
        return path

    def audio_path(self) -> Path:
        path = self.audio_vae or self.checkpoint
        if path is None:
            raise ValueError("no audio VAE: pass --model-path (a single-file checkpoint) or --audio-vae-path")
        return path

    def check(self) -> ModelSources:
        for name, path in (
            ("--model-path", self.checkpoint),
            ("--video-vae-path", self.video_vae),
            ("--audio-vae-path", self.audio_vae),
        ):
            if path is not None and not Path(path).is_file():
                raise FileNotFoundError(f"{name} {str(path)!r} is not a file (expected a .safetensors checkpoint)")
        return self


class LazyModels:
    """Builds each model on first use and frees them all on `release()` (or leaving a `with` block)."""

    def __init__(
        self, sources: ModelSources, device: str | torch.device | None = None, dtype: torch.dtype | None = None
    ):
        self.sources = sources
        self.device = resolve_device(device)
        self.dtype = dtype or default_dtype(self.device)
        self._models: dict[str, nn.Module] = {}

    def _get(self, name: str, build) -> nn.Module:
        if name not in self._models:
            self._models[name] = build()
        return self._models[name]

    def video_encoder(self) -> VideoEncoder:
        return self._get(
            "video_encoder",
            lambda: build_model(VIDEO_ENCODER, self.sources.video_path(), dtype=self.dtype, device=self.device),
        )

    def video_decoder(self) -> VideoDecoder:
        def build() -> nn.Module:
            # The file's VAE class decides: convolutional (LTX-2 / 2.3, 2.5 conv) or diffusion decoder (2.5).
            path = self.sources.video_path()
            spec = video_decoder_spec({"vae": read_checkpoint_config(path, "vae")})
            return build_model(spec, path, dtype=self.dtype, device=self.device)

        return self._get("video_decoder", build)

    def audio_encoder(self) -> AudioEncoder:
        return self._get(
            "audio_encoder",
            lambda: build_model(AUDIO_ENCODER, self.sources.audio_path(), dtype=torch.float32, device=self.device),
        )

    def audio_decoder_and_vocoder(self) -> tuple[nn.Module, nn.Module]:
        decoder = self._get(
            "audio_decoder",
            lambda: build_model(AUDIO_DECODER, self.sources.audio_path(), dtype=torch.float32, device=self.device),
        )
        vocoder = self._get(
            "vocoder",
            lambda: build_model(VOCODER, self.sources.audio_path(), dtype=torch.float32, device=self.device),
        )
        return decoder, vocoder

    def release(self) -> None:
        for model in self._models.values():
            free_model_weights(model)
        self._models.clear()
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def __enter__(self) -> LazyModels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@torch.inference_mode()
def encode_video(encoder: VideoEncoder, pixels: torch.Tensor, tiled: bool = False) -> torch.Tensor:
    """VAE input (1, 3, F, H, W) in [-1, 1] -> latents (C, F', H', W') on the CPU."""
    device = encoder.conv_in.conv.weight.device
    dtype = encoder.conv_in.conv.weight.dtype
    x = pixels.to(device=device, dtype=dtype)
    latent = encoder.encode_tiled(x, PREPROCESS_TILING) if tiled else encoder(x)
    return latent[0].cpu()


@torch.inference_mode()
def encode_waveform(encoder: AudioEncoder, waveform: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """Stereo (2, N) float waveform -> audio latents (C, T, bins) on the CPU, computed in float32."""
    return encode_audio(waveform.unsqueeze(0).float(), sample_rate, encoder)[0].float().cpu()


@torch.inference_mode()
def decode_waveform(decoder: nn.Module, vocoder: nn.Module, latents: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Audio latents (C, T, bins) -> stereo waveform (2, N) float32 and its sample rate."""
    device = next(decoder.parameters()).device
    wave = decode_audio(latents.unsqueeze(0).float().to(device), decoder, vocoder)
    return wave[0].cpu(), int(vocoder.output_sample_rate)
