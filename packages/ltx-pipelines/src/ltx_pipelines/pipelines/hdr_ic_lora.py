"""The pipeline class of `python -m ltx_pipelines.hdr_ic_lora`
(what it does: that module's docstring)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import VideoConditionByReferenceLatent
from ltx_core.latent_tiles import AxisTileCount, LatentTile, TileCounts
from ltx_core.loader import LoraSpec, read_checkpoint_config
from ltx_core.model.transformer import X0Model
from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import (
    NoiseSource,
    contexts_on,
    encode_conditioning_images,
    run_denoising_stage,
    upsample_between_stages,
)
from ltx_pipelines.engine.generation import video_frame_chunks
from ltx_pipelines.engine.ic_references import ReferenceFactors, reference_factors
from ltx_pipelines.engine.model_versions import (
    DEFAULT_SPATIAL_TILE,
    SPATIAL_TILE_OVERLAP,
)
from ltx_pipelines.engine.prompt_pipeline import Pipeline, PipelineOptions
from ltx_pipelines.engine.tiled_refinement import run_tiled_video_stage
from ltx_pipelines.engine.two_stage_runner import half_size, standalone_source
from ltx_pipelines.io import MediaError, iter_video_frames, probe_video
from ltx_pipelines.io.hdr import aligned_size, fit_reflect_pad, logc3_decode, sdr_to_working_space

if TYPE_CHECKING:
    from typing_extensions import Unpack


__all__ = ["HDRGeneration", "HDRICLoraPipeline", "SdrClip"]


SIZE_MULTIPLE = 64


TEMPORAL_TILE, TEMPORAL_TILE_OVERLAP = 32, 16


# Stage 2 as the reference runs it: two tiles per axis (latent overlaps 8 frames, 6 cells), and the first
# two stage-2 sigmas, then 0.
STAGE_2_TILES = TileCounts(frames=AxisTileCount(2, 8), height=AxisTileCount(2, 6), width=AxisTileCount(2, 6))


TILED_ENCODE_PIXELS = 512 * 768
"""References larger than this (height x width) are VAE-encoded tile by tile."""


def stage_2_sigmas() -> torch.Tensor:
    return torch.cat([stage_2_distilled_sigmas()[:2].float(), torch.zeros(1)])


def decode_tiling(spatial_tile: int) -> TilingConfig:
    """The float32 VAE decode layout: `spatial_tile`-pixel tiles (256 overlap), 32-frame tiles (16 overlap)."""
    spatial = AxisTiling(spatial_tile, SPATIAL_TILE_OVERLAP)
    return TilingConfig(AxisTiling(TEMPORAL_TILE, TEMPORAL_TILE_OVERLAP), spatial, spatial)


@dataclass(frozen=True)
class SdrClip:
    """An SDR input clip: (F, H, W, 3) uint8 Rec.709 frames and their rate."""

    frames: torch.Tensor
    fps: float

    @classmethod
    def from_file(cls, path: str | Path, max_frames: int | None = None) -> SdrClip:
        frames = list(iter_video_frames(path, max_frames=max_frames))
        if not frames:
            raise MediaError(f"no frames decoded from {str(path)!r}")
        return cls(torch.stack(frames), probe_video(path).fps)


@dataclass
class HDRGeneration:
    """Scene-linear Rec.709 frames, decoded: (f, H, W, 3) float32 chunks on the CPU (writing them builds no
    model)."""

    frames: Sequence[torch.Tensor]
    num_frames: int
    height: int
    width: int
    frame_rate: float
    latents: dict[str, torch.Tensor] = field(default_factory=dict)


def _every_other(chunks: Iterator[torch.Tensor]) -> Iterator[torch.Tensor]:
    """Frames 0, 2, 4, ... of a chunked frame stream (the high-quality mode generated twice as many)."""
    seen = 0
    for chunk in chunks:
        yield chunk[(-seen) % 2 :: 2]
        seen += chunk.shape[0]


class HDRICLoraPipeline(Pipeline):
    """Two-stage distilled SDR-to-HDR over the HDR IC-LoRA (fused into both stages), from given contexts (no
    prompt, no Gemma: a pipeline of its own kind, whose `generate_from_contexts` returns the linear HDR frames).

    The reference downscale factor comes from the LoRA's metadata. `hdr_lora` None only runs the
    random-weight demo.
    """

    spatial_multiple = SIZE_MULTIPLE

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        *,
        hdr_lora: LoraSpec | None,
        stage_2_tiles: TileCounts = STAGE_2_TILES,
        **options: Unpack[PipelineOptions],
    ) -> None:
        super().__init__(checkpoint_path, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.hdr_lora = hdr_lora
        self.factors: ReferenceFactors = reference_factors([hdr_lora] if hdr_lora is not None else [])
        self.stage_2_tiles = stage_2_tiles

    @property
    def decode_tiling(self) -> TilingConfig:
        """The VAE layout of the float32 decode (and of encoding large references)."""
        return self.tiling if self.tiling is not None else decode_tiling(DEFAULT_SPATIAL_TILE)

    @property
    def size_multiple(self) -> int:
        """Generated sizes are multiples of this: 64 times the reference downscale factor."""
        return SIZE_MULTIPLE * self.factors.downscale

    def _reference_pixels(self, clip: SdrClip, frames: int, height: int, width: int, duplicate: bool) -> torch.Tensor:
        """The clip's first frames in the working space, reflect-padded to (height, width): (1, 3, F, h, w)
        in [-1, 1]; with `duplicate` each frame is repeated twice (high-quality mode)."""
        used = (frames + 1) // 2 if duplicate else frames
        if clip.frames.shape[0] < used:
            raise ValueError(f"the input has {clip.frames.shape[0]} frames; {used} are needed")
        working = sdr_to_working_space(clip.frames[:used])
        video = fit_reflect_pad(working, height, width) * 2.0 - 1.0
        if duplicate:
            video = video.repeat_interleave(2, dim=2)[:, :, :frames]
        return video

    def generate_from_contexts(
        self,
        contexts: TextContexts,
        *,
        clip: SdrClip,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        high_quality: bool = False,
        reference_strength: float = 1.0,
    ) -> HDRGeneration:
        """Both stages and the float32 decode of `num_frames` frames at (height, width) (any size: it is
        generated padded up to `size_multiple` and cropped back)."""
        if num_frames < 1 or (num_frames - 1) % 8:
            raise ValueError(f"num_frames must be 8k+1, got {num_frames}")
        generated = 2 * num_frames - 1 if high_quality else num_frames
        gen_h, gen_w = aligned_size(height, width, self.size_multiple)
        full = self.output_shape(gen_h, gen_w, generated, frame_rate)
        references, statistics = self._encode_references(clip, full, high_quality)
        latents = self._denoise(contexts, full, references, statistics, noise, reference_strength)
        refined = latents["stage_2.video_latent"]

        def linear_frames() -> Iterator[torch.Tensor]:
            # float32 weights and latent: the inverse LogC3 curve amplifies any rounding of the codes.
            placement = replace(self.placement, dtype=torch.float32)
            for chunk in video_frame_chunks(
                self.checkpoint_path, placement, refined.float(), self.decode_tiling, noise
            ):
                # Scene light is never negative; codes below the curve's black level would decode below 0.
                yield logc3_decode(chunk.float()).clamp(min=0.0)[:, :height, :width]

        # Decoded here, before anything is written: the EXR and HEVC writers only encode what they are given.
        chunks = _every_other(linear_frames()) if high_quality else linear_frames()
        frames = tuple(chunk.to("cpu") for chunk in chunks)
        return HDRGeneration(frames, num_frames, height, width, frame_rate, latents)

    def _encode_references(
        self, clip: SdrClip, full: VideoPixelShape, high_quality: bool
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.nn.Module]:
        """The clip's reference latents at the stage-1 and the stage-2 size (over the reference downscale
        factor), and the VAE latent statistics the upsampler needs, with one encoder load."""
        device, dtype = self.placement.device, self.placement.dtype
        scale = self.factors.downscale

        def encode_reference(encoder: torch.nn.Module) -> list[list[Any]]:
            latents = []
            for shape in (half_size(full), full):
                pixels = self._reference_pixels(
                    clip, full.frames, shape.height // scale, shape.width // scale, high_quality
                )
                pixels = pixels.to(device=device, dtype=dtype)
                with torch.no_grad():
                    if pixels.shape[-2] * pixels.shape[-1] > TILED_ENCODE_PIXELS:
                        # Large references are encoded in tiles (the decode layout) to bound activation memory.
                        latents.append(encoder.encode_tiled(pixels, self.decode_tiling).to(dtype))
                    else:
                        latents.append(encoder(pixels))
            return [[latent] for latent in latents]

        encoded = encode_conditioning_images(
            (), self.checkpoint_path, self.placement, [half_size(full), full],
            keep_latent_statistics=True, also_encode=encode_reference,
        )  # fmt: skip
        (reference_half,), (reference_full,) = encoded.per_stage
        assert encoded.latent_statistics is not None
        return (reference_half, reference_full), encoded.latent_statistics

    def _denoise(
        self,
        contexts: TextContexts,
        full: VideoPixelShape,
        references: tuple[torch.Tensor, torch.Tensor],
        statistics: torch.nn.Module,
        noise: NoiseSource,
        reference_strength: float,
    ) -> dict[str, torch.Tensor]:
        """Stage 1 at half size, the upsampling, stage 2 over tiles (one transformer, the HDR IC-LoRA fused):
        the latents by name, `stage_2.video_latent` the final one."""
        device, dtype = self.placement.device, self.placement.dtype
        positive = contexts_on(contexts, self.placement)
        scale = self.factors.downscale
        reference_half, reference_full = references

        def reference(latent: torch.Tensor) -> VideoConditionByReferenceLatent:
            return VideoConditionByReferenceLatent(latent, downscale_factor=scale, strength=reference_strength)

        def tile_reference(tile: LatentTile) -> list[VideoConditionByReferenceLatent]:
            f, h, w = tile.cells
            cells = (f, slice(h.start // scale, h.stop // scale), slice(w.start // scale, w.stop // scale))
            return [reference(reference_full[(slice(None), slice(None), *cells)])]

        latents: dict[str, torch.Tensor] = {}
        loras = (*self.loras, *([self.hdr_lora] if self.hdr_lora is not None else []))
        with self.transformer(loras) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, None)
            stage_1 = run_denoising_stage(
                denoiser, half_size(full), distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=[reference(reference_half)], with_audio=False, progress=self.progress,
            )  # fmt: skip
            assert stage_1.video_latent is not None
            latents["stage_1.video_latent"] = stage_1.video_latent
            upsampled = upsample_between_stages(
                stage_1.video_latent,
                standalone_source(self.checkpoint_path, self.spatial_upsampler_path),
                statistics,
                self.placement,
            )
            latents["upsampled_video_latent"] = upsampled
            latents["stage_2.video_latent"] = run_tiled_video_stage(
                denoiser, upsampled, stage_2_sigmas(), noise, "stage_2", fps=full.fps, counts=self.stage_2_tiles,
                tile_conditionings=tile_reference, device=device, dtype=dtype, progress=self.progress,
            )  # fmt: skip
        return latents


def _context_width(checkpoint: Path) -> int | None:
    transformer = read_checkpoint_config(checkpoint).get("transformer", {})
    key = "cross_attention_dim" if transformer.get("caption_proj_before_connector") else "caption_channels"
    value = transformer.get(key)
    return int(value) if isinstance(value, int) else None
