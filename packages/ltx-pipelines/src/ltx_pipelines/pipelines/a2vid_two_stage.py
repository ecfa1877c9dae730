"""The pipeline class of `python -m ltx_pipelines.a2vid_two_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from ltx_core.components.denoisers import GuidedDenoiser
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import LTX2Scheduler, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import AudioLatentShape
from ltx_pipelines.engine.defaults import (
    DEFAULT_MAX_BATCH_SIZE,
    TWO_STAGE_SPATIAL_MULTIPLE,
    defaults_for_checkpoint,
)
from ltx_pipelines.engine.final_latents import FinalLatents, Waveform
from ltx_pipelines.engine.guided import (
    GuidanceSettings,
    GuidedInputs,
    checked_max_batch_size,
    checked_stage_sigmas,
    guided_inputs,
    negative_prompt_or_default,
    resolve_guidance,
    stage_sigmas_or,
)
from ltx_pipelines.engine.noise_sources import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.source_latents import encode_audio_latent
from ltx_pipelines.engine.stage_blocks import ImageCondition
from ltx_pipelines.engine.two_stage_runner import StagePlan, distilled_lora_stages, run_two_stages
from ltx_pipelines.io import read_audio

if TYPE_CHECKING:
    from typing_extensions import Unpack


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AudioInput:
    """The conditioning audio: a waveform (channels, N) float in [-1, 1] at `sample_rate` Hz."""

    waveform: torch.Tensor
    sample_rate: int

    def __post_init__(self) -> None:
        wave = self.waveform
        if wave.dim() == 3 and wave.shape[0] == 1:
            object.__setattr__(self, "waveform", wave[0])
        if self.waveform.dim() != 2 or self.waveform.shape[-1] == 0:
            raise ValueError(
                f"audio waveform must be (channels, samples) or (1, channels, samples), got {tuple(wave.shape)}"
            )
        if self.waveform.shape[0] > 2:  # the audio VAE and the AAC track are stereo: fold surround into mono
            object.__setattr__(self, "waveform", self.waveform.float().mean(dim=0, keepdim=True))
        if self.sample_rate < 1:
            raise ValueError(f"audio sample_rate must be a positive number of Hz, got {self.sample_rate}")

    @classmethod
    def from_file(cls, path: str | Path, *, start_time: float = 0.0, max_duration: float | None = None) -> AudioInput:
        clip = read_audio(path, start_time=start_time, max_duration=max_duration)
        return cls(clip.waveform, clip.sample_rate)

    def first_seconds(self, seconds: float) -> torch.Tensor:
        """The waveform cut to at most `seconds`."""
        return self.waveform[:, : round(seconds * self.sample_rate)]


class A2VidPipelineTwoStage(PromptPipeline):
    """Video for a given audio track: full checkpoint, x2 upsampler, distilled LoRA (stage 2) and Gemma.

    Call with a prompt and `audio=AudioInput(...)` (no audio guidance: the audio is frozen) or drive
    `generate_from_contexts` directly.
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE
    stage_names = ("stage_1", "stage_2")
    """The denoising stages, as named in noise draws, latents and `stage_sigmas`."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        distilled_lora: LoraSpec | None,
        max_batch_size: int | None = DEFAULT_MAX_BATCH_SIZE,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`distilled_lora` is fused into stage 2 (with `loras`, fused into both); `max_batch_size`: how many
        guidance passes share one transformer call (None: all); `options`: see `PipelineOptions`."""
        self.max_batch_size = checked_max_batch_size(max_batch_size)
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.distilled_lora = distilled_lora
        if distilled_lora is None:
            logger.warning("no distilled LoRA: stage 2 refines with the plain full model")

    def guidance_settings(
        self, num_inference_steps: int | None = None, video_guidance: MultiModalGuiderParams | None = None
    ) -> GuidanceSettings:
        """The given values, with the checkpoint generation's defaults for those left as None; the frozen
        audio stream's guidance is the no-op one."""
        defaults = defaults_for_checkpoint(self.checkpoint_path)
        return resolve_guidance(defaults, num_inference_steps, video_guidance, MultiModalGuiderParams())

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], tuple[LoraSpec, ...]]:
        """LoRAs fused into the stage-1 and the stage-2 transformer."""
        return distilled_lora_stages(self.loras, self.distilled_lora)

    def stage_1_denoiser(self, transformer: nn.Module, inputs: GuidedInputs) -> GuidedDenoiser:
        """Stage 1's video guidance over `transformer`. The reference's audio guider has no negative context:
        the negative pass keeps the positive audio context (the video attends to the audio stream under it)."""
        if self.step_cache is not None:
            from ltx_core.components.step_cache import StepCachedTransformer

            transformer = StepCachedTransformer(transformer, self.step_cache)
        return GuidedDenoiser(
            X0Model(transformer),
            inputs.positive.video,
            inputs.positive.audio,
            negative_video_context=None if inputs.negative is None else inputs.negative.video,
            video_guidance=inputs.settings.video,
            audio_guidance=inputs.settings.audio,
            max_batch_size=self.max_batch_size,
        )

    def generate(
        self,
        prompt: str,
        *,
        audio: AudioInput,
        seed: int,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        images: Sequence[ImageCondition] = (),
        enhance_prompt: bool = False,
        negative_prompt: str | None = None,
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
    ) -> FinalLatents:
        """The final latents of the video for `audio` from a prompt; the same seed and settings give the same result."""
        self.output_shape(height, width, num_frames, frame_rate)
        settings = self.guidance_settings(num_inference_steps, video_guidance)  # before Gemma runs
        (contexts, negative), final_prompt = self.encode_prompts(
            [prompt, negative_prompt_or_default(negative_prompt)], seed=seed, images=images, enhance=enhance_prompt
        )
        final = self.latents_from_contexts(
            contexts, negative, audio=audio, height=height, width=width, num_frames=num_frames,
            frame_rate=frame_rate, noise=SeededNoise(seed), images=images,
            num_inference_steps=settings.num_inference_steps, video_guidance=settings.video,
        )  # fmt: skip
        return replace(final, prompt=final_prompt)

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        audio: AudioInput,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        images: Sequence[ImageCondition] = (),
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
    ) -> FinalLatents:
        """Both stages' final latents from given contexts, the audio and a noise source (the parity seam)."""
        full = self.output_shape(height, width, num_frames, frame_rate)
        given = checked_stage_sigmas(stage_sigmas, self.stage_names)
        settings = self.guidance_settings(num_inference_steps, video_guidance)
        inputs = guided_inputs(settings, contexts, negative_contexts, self.placement)
        stage_1_sigmas = stage_sigmas_or(given, "stage_1", lambda: LTX2Scheduler().sigmas(settings.num_inference_steps))
        stage_2_sigmas = stage_sigmas_or(given, "stage_2", stage_2_distilled_sigmas)
        loras_1, loras_2 = self.stage_loras()

        duration = full.frames / full.fps
        audio_latent = encode_audio_latent(
            self.checkpoint_path,
            self.placement,
            audio.waveform,
            audio.sample_rate,
            latent_frames=AudioLatentShape.from_duration(1, duration).frames,
        )

        # The encoded latent, given as the initial one of both stages, never changes.
        result = run_two_stages(
            self, self.spatial_upsampler_path, full, noise,
            stage_1=StagePlan(loras_1, stage_1_sigmas), stage_2=StagePlan(loras_2, stage_2_sigmas),
            stage_1_denoiser=lambda transformer: self.stage_1_denoiser(transformer, inputs),
            refine_contexts=inputs.positive, images=images,
            frozen_audio=audio_latent,
        )  # fmt: skip
        latents = {"encoded_audio_latent": audio_latent, **result.latents}

        # The input track itself (cut to the video) is shipped, not the VAE's reconstruction of it; a saved
        # latents file keeps it too, so `ltx_pipelines.decode` writes the same sound.
        final = self.finished(full, result.stage_2.video_latent, audio_latent, noise, latents)
        track = Waveform(audio.first_seconds(duration).float(), audio.sample_rate)
        return replace(final, shipped_audio=track)


@dataclass(frozen=True)
class AudioRequest:
    """The audio-input flags, checked: the file, where in it the audio starts, and at most how long."""

    path: Path
    start_time: float
    max_duration: float | None
    """None: the video's duration."""
