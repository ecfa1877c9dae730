"""The pipeline class of `python -m ltx_pipelines.lipdub`
(what it does: that module's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import AudioConditionByReferenceLatent, FrozenModality
from ltx_core.loader import LoraSpec, ModelFiles
from ltx_core.model.audio_vae import AUDIO_ENCODER, encode_audio
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.defaults import TWO_STAGE_SPATIAL_MULTIPLE
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.ic_references import VideoReference, reference_conditionings, reference_factors
from ltx_pipelines.engine.model_loading import loaded
from ltx_pipelines.engine.noise_sources import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stage_blocks import ImageCondition, run_denoising_stage
from ltx_pipelines.engine.stage_steps import contexts_on, encode_conditioning_images, upsample_between_stages
from ltx_pipelines.io import AudioClip, MediaError, probe_video, read_audio

if TYPE_CHECKING:
    from typing_extensions import Unpack


__all__ = [
    "LipDubPipeline",
    "LipDubReference",
    "reference_timing",
]


logger = logging.getLogger(__name__)


def snap_to_frame_grid(frames: int) -> int:
    """The largest 8k+1 frame count <= `frames` (at least 1)."""
    return max(1, (frames - 1) // 8 * 8 + 1)


def reference_timing(path: str | Path) -> tuple[int, float]:
    """(frame count snapped down to 8k+1, frame rate of the container) of a reference video."""
    info = probe_video(path)
    if info.frames < 1 or info.fps <= 0:
        raise MediaError(f"{str(path)!r}: {info.frames} frames at {info.fps} fps; need frames and a frame rate")
    return snap_to_frame_grid(info.frames), info.fps


@dataclass(frozen=True)
class LipDubReference:
    """The reference clip: its video (a file or prepared pixels, see `VideoReference`) and its audio
    (`audio` given, else the video file's first audio track)."""

    video: VideoReference
    audio: AudioClip | None = None

    def load_audio(self) -> AudioClip:
        if self.audio is not None:
            return self.audio
        if self.video.path is None:
            raise ValueError("a lip-dub reference needs its audio: give `audio` or a video file with an audio track")
        return read_audio(self.video.path)


def _stereo_or_mono(waveform: torch.Tensor) -> torch.Tensor:
    """(channels, N) -> (1, 1 or 2, N): more than two channels are mixed down to mono."""
    if waveform.shape[0] > 2:
        logger.warning("reference audio has %d channels; mixing it down to mono", waveform.shape[0])
        waveform = waveform.mean(dim=0, keepdim=True)
    return waveform.unsqueeze(0)


class LipDubPipeline(PromptPipeline):
    """Distilled two-stage lip-dub over one lip-dub IC-LoRA, fused into the transformer of both stages.

    `loras` (the options) are fused as well. The reference downscale factor comes from the LoRA's
    metadata (1 where absent).
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        lip_dub_lora: LoraSpec | None,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`lip_dub_lora` None only runs the random-weight demo (the reference conditions a model not
        trained for it)."""
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.lip_dub_lora = lip_dub_lora
        self.factors = reference_factors([lip_dub_lora] if lip_dub_lora is not None else [])
        if lip_dub_lora is None:
            logger.warning("no lip-dub IC-LoRA: the reference conditions a transformer not trained for it")

    def stage_loras(self) -> tuple[LoraSpec, ...]:
        """The LoRAs of the one transformer both stages share."""
        return (*self.loras, *([self.lip_dub_lora] if self.lip_dub_lora is not None else []))

    def encode_reference_audio(self, clip: AudioClip) -> torch.Tensor:
        """The reference waveform as an audio latent (1, 8, T, 16)."""
        with loaded(AUDIO_ENCODER, self.checkpoint_path, self.placement) as encoder, torch.no_grad():
            return encode_audio(_stereo_or_mono(clip.waveform).to(self.placement.dtype), clip.sample_rate, encoder)

    def generate(
        self,
        prompt: str,
        *,
        reference: LipDubReference,
        seed: int,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        images: Sequence[ImageCondition] = (),
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """Dub `reference` from a prompt (no guidance); the same seed gives the same result."""
        self.output_shape(height, width, num_frames, frame_rate)
        (contexts,), final_prompt = self.encode_prompts([prompt], seed=seed, images=images, enhance=enhance_prompt)
        final = self.latents_from_contexts(
            contexts, height=height, width=width, num_frames=num_frames, frame_rate=frame_rate,
            noise=SeededNoise(seed), reference=reference, images=images,
        )  # fmt: skip
        return replace(final, prompt=final_prompt)

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        *,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        reference: LipDubReference,
        images: Sequence[ImageCondition] = (),
    ) -> FinalLatents:
        """Both stages, from given contexts, the reference and a noise source.

        `num_frames` / `frame_rate` are the reference's (see `reference_timing`); its frames beyond
        `num_frames` are not used.
        """
        full = self.output_shape(height, width, num_frames, frame_rate)
        half = VideoPixelShape(1, num_frames, height // 2, width // 2, frame_rate)
        device, dtype = self.placement.device, self.placement.dtype
        positive = contexts_on(contexts, self.placement)
        reference_audio = self.encode_reference_audio(reference.load_audio())

        def encode_references(encoder: torch.nn.Module) -> list[list[Any]]:
            # Unlike IC-LoRA video-to-video, the reference video guides both stages, each at its size.
            return [
                reference_conditionings(
                    [reference.video],
                    encoder,
                    height=shape.height,
                    width=shape.width,
                    num_frames=num_frames,
                    factors=self.factors,
                    device=device,
                    dtype=dtype,
                )
                for shape in (half, full)
            ]

        encoded = encode_conditioning_images(
            images, self.checkpoint_path, self.placement, [half, full],
            keep_latent_statistics=True, also_encode=encode_references,
        )  # fmt: skip
        stage_1_items, stage_2_items = encoded.per_stage
        assert encoded.latent_statistics is not None

        latents: dict[str, torch.Tensor] = {}
        with self.transformer(self.stage_loras()) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, positive.audio)
            stage_1 = run_denoising_stage(
                denoiser, half, distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=stage_1_items,
                audio_conditionings=[AudioConditionByReferenceLatent.preceding(reference_audio)],
                progress=self.progress,
            )  # fmt: skip
            latents.update(stage_1.named("stage_1"))
            upsampled = upsample_between_stages(
                stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
            )
            latents["upsampled_video_latent"] = upsampled
            # Stage 2 holds the stage-1 audio fixed (frozen after the reference is appended, so the
            # reference tokens are frozen too); as in the reference, the stage-1 audio is its reference.
            assert stage_1.audio_latent is not None
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_distilled_sigmas(), noise, "stage_2", device, dtype,
                conditionings=stage_2_items,
                audio_conditionings=[AudioConditionByReferenceLatent.preceding(stage_1.audio_latent), FrozenModality()],
                initial_video=upsampled, initial_audio=stage_1.audio_latent, progress=self.progress,
            )  # fmt: skip
            latents.update(stage_2.named("stage_2"))
        return self.finished(full, stage_2.video_latent, stage_1.audio_latent, noise, latents)
