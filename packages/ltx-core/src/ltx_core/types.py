"""Shapes of pixel and latent tensors, and the fixed ratios between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Audio latents: 16 kHz mel frames with hop 160 (100 mel frames/s), compressed 4x in time.
AUDIO_SAMPLE_RATE = 16_000
AUDIO_HOP_LENGTH = 160
AUDIO_LATENT_DOWNSAMPLE = 4
AUDIO_LATENTS_PER_SECOND = AUDIO_SAMPLE_RATE / AUDIO_HOP_LENGTH / AUDIO_LATENT_DOWNSAMPLE  # 25.0
AUDIO_LATENT_CHANNELS = 8
AUDIO_LATENT_MEL_BINS = 16
VIDEO_LATENT_CHANNELS = 128


@dataclass(frozen=True)
class SpatioTemporalScaleFactors:
    """How many pixels (frames) one latent cell covers along each axis."""

    time: int = 8
    height: int = 32
    width: int = 32


DEFAULT_SCALE_FACTORS = SpatioTemporalScaleFactors()


@dataclass(frozen=True)
class VideoPixelShape:
    batch: int
    frames: int
    height: int
    width: int
    fps: float = 24.0

    def check(self, spatial_multiple: int = 32, scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS) -> None:
        """Raise ValueError naming the bad value when the shape has no exact latent counterpart."""
        if self.batch < 1:
            raise ValueError(f"batch must be >= 1, got {self.batch}")
        if self.frames < 1 or (self.frames - 1) % scale.time != 0:
            raise ValueError(
                f"num frames must be {scale.time}k+1 (1, {scale.time + 1}, {2 * scale.time + 1}, ...), "
                f"got {self.frames}"
            )
        for name, value in (("height", self.height), ("width", self.width)):
            if value < spatial_multiple or value % spatial_multiple != 0:
                raise ValueError(f"{name} must be a positive multiple of {spatial_multiple}, got {value}")
        if not self.fps > 0:
            raise ValueError(f"frame rate must be positive, got {self.fps}")

    @property
    def duration_s(self) -> float:
        return self.frames / self.fps


@dataclass(frozen=True)
class VideoLatentShape:
    batch: int
    channels: int
    frames: int
    height: int
    width: int

    @classmethod
    def from_pixel_shape(
        cls,
        shape: VideoPixelShape,
        channels: int = VIDEO_LATENT_CHANNELS,
        scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS,
    ) -> VideoLatentShape:
        return cls(
            batch=shape.batch,
            channels=channels,
            frames=(shape.frames - 1) // scale.time + 1,
            height=shape.height // scale.height,
            width=shape.width // scale.width,
        )

    def to_pixel_shape(
        self, fps: float = 24.0, scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS
    ) -> VideoPixelShape:
        return VideoPixelShape(
            batch=self.batch,
            frames=(self.frames - 1) * scale.time + 1,
            height=self.height * scale.height,
            width=self.width * scale.width,
            fps=fps,
        )

    @property
    def dims(self) -> tuple[int, int, int, int, int]:
        return (self.batch, self.channels, self.frames, self.height, self.width)

    @property
    def token_count(self) -> int:
        return self.frames * self.height * self.width


@dataclass(frozen=True)
class AudioLatentShape:
    batch: int
    channels: int
    frames: int
    mel_bins: int

    @classmethod
    def from_duration(
        cls,
        batch: int,
        duration_s: float,
        channels: int = AUDIO_LATENT_CHANNELS,
        mel_bins: int = AUDIO_LATENT_MEL_BINS,
        latents_per_second: float = AUDIO_LATENTS_PER_SECOND,
    ) -> AudioLatentShape:
        return cls(batch=batch, channels=channels, frames=round(duration_s * latents_per_second), mel_bins=mel_bins)

    @classmethod
    def from_video(cls, shape: VideoPixelShape, **kwargs: float) -> AudioLatentShape:
        """The audio latent that spans the same time as `shape` (round(frames / fps * 25) steps)."""
        return cls.from_duration(shape.batch, shape.frames / shape.fps, **kwargs)  # type: ignore[arg-type]

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (self.batch, self.channels, self.frames, self.mel_bins)


@dataclass(frozen=True, eq=False)
class LatentState:
    """One modality's token sequence during sampling.

    The first tokens are the target grid (patchified, in the tools' token order); conditioning items
    may append more tokens after them, never before, so `LatentTools.clear_conditioning` can cut
    them off again by count.

    latent: (B, T, C) current noisy tokens.
    denoise_mask: (B, T, 1) float32, 1 = token is generated, 0 = token is kept at `clean_latent`;
        in between it is a partial strength (timesteps = mask * sigma).
    positions: (B, n_axes, T, 2) float32 [start, end) extents in the transformer's units.
    clean_latent: (B, T, C) what masked tokens are pulled back to after every step.
    attention_mask: optional (B, T, T) self-attention weights in [0, 1]; None = full attention.
    frozen: the whole stream is held fixed (its per-sample sigma is reported as 0 to the model).
    keyframes_mask: optional (B, T, 1), non-zero on tokens that get the LTX-2.5 keyframe embedding
        (generated keyframe slots); None = no token marked.
    """

    latent: torch.Tensor
    denoise_mask: torch.Tensor
    positions: torch.Tensor
    clean_latent: torch.Tensor
    attention_mask: torch.Tensor | None = None
    frozen: bool = False
    keyframes_mask: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        return int(self.latent.shape[0])

    @property
    def token_count(self) -> int:
        return int(self.latent.shape[1])
