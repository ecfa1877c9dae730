"""The pipeline class of `python -m ltx_pipelines.lipdub`
(what it does: that module's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import AudioConditionByReferenceLatent, ConditioningItem, FrozenModality
from ltx_core.loader import LoraSpec, ModelFiles
from ltx_core.model.audio_vae import AUDIO_ENCODER, encode_audio
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, NoiseSource, StageResult, contexts_on, finished_latents
from ltx_pipelines.engine.ic_references import VideoReference, reference_conditionings, reference_factors
from ltx_pipelines.engine.model_loading import loaded
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, TwoStagePromptPipeline, refuse_duration
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.engine.two_stage_runner import (
    ConditioningHook,
    StageItems,
    StagePlan,
    run_two_stages,
    simple_denoiser,
)
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


class LipDubPipeline(TwoStagePromptPipeline):
    """Distilled two-stage lip-dub over one lip-dub IC-LoRA, fused into the transformer of both stages.

    `loras` (the options) are fused as well. The reference downscale factor comes from the LoRA's
    metadata (1 where absent).
    """

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
        super().__init__(checkpoint_path, spatial_upsampler_path, gemma_root, **options)
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
        video: VideoRequest = VideoRequest(),  # noqa: B008 - a frozen value
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """Dub `reference` from a prompt (no guidance); the same seed gives the same result. `video`'s length and
        frame rate are the reference's (see `reference_timing`); what it leaves unset takes the model version's
        defaults."""
        refuse_duration(video, type(self).__name__)
        call = self.prompted(prompt, seed=seed, video=video, enhance_prompt=enhance_prompt)
        final = self.latents_from_contexts(call.contexts, video=call.video, noise=call.noise, reference=reference)
        return replace(final, prompt=call.prompt)

    def latents_from_contexts(
        self, contexts: TextContexts, *, video: VideoRequest, noise: NoiseSource, reference: LipDubReference
    ) -> FinalLatents:
        """Both stages, from given contexts, a filled `video` request, the reference and a noise source.

        `video.num_frames` / `video.frame_rate` are the reference's (see `reference_timing`); its frames beyond
        `num_frames` are not used.
        """
        full = video.pixel_shape(self.spatial_multiple)
        positive = contexts_on(contexts, self.placement)
        hook = _LipDubConditioning(self, reference.video, self.encode_reference_audio(reference.load_audio()))
        loras = self.stage_loras()
        result = run_two_stages(
            self, self.spatial_upsampler_path, full, noise,
            stage_1=StagePlan(loras, distilled_sigmas()), stage_2=StagePlan(loras, stage_2_distilled_sigmas()),
            stage_1_denoiser=simple_denoiser(positive), stage_2_denoiser=simple_denoiser(positive),
            refine_contexts=positive, images=video.images, generated_keyframes=video.generated_keyframes, hook=hook,
            share_transformer=True,
        )  # fmt: skip
        return finished_latents(
            self, full, result.refined.video_latent, result.stage_1.audio_latent, noise, result.latents
        )


@dataclass(frozen=True)
class _LipDubConditioning(ConditioningHook):
    """The reference video at each stage's size (unlike IC-LoRA video-to-video it guides both stages), and
    the reference audio preceding the generated audio in stage 1."""

    pipeline: LipDubPipeline
    video: VideoReference
    audio: torch.Tensor
    encodes: bool = True

    def encode(self, encoder: nn.Module, half: VideoPixelShape, full: VideoPixelShape) -> list[list[ConditioningItem]]:
        return [self._reference_at(encoder, shape) for shape in (half, full)]

    def _reference_at(self, encoder: nn.Module, shape: VideoPixelShape) -> list[ConditioningItem]:
        placement = self.pipeline.placement
        return reference_conditionings(
            [self.video], encoder, height=shape.height, width=shape.width, num_frames=shape.frames,
            factors=self.pipeline.factors, device=placement.device, dtype=placement.dtype,
        )  # fmt: skip

    def stage_1(self) -> StageItems:
        return StageItems(audio=(AudioConditionByReferenceLatent.preceding(self.audio),))

    def stage_2(self, first: StageResult, upsampled: Mapping[str, torch.Tensor]) -> StageItems:
        # Stage 2 holds the stage-1 audio fixed (frozen after the reference is appended, so the reference
        # tokens are frozen too); as in the reference, the stage-1 audio is its reference.
        assert first.audio_latent is not None
        return StageItems(audio=(AudioConditionByReferenceLatent.preceding(first.audio_latent), FrozenModality()))
