"""The pipeline class of `python -m ltx_pipelines.a2vid_two_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from ltx_core.components.denoisers import GuidedDenoiser
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import AudioLatentShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, NoiseSource, Waveform, finished_latents
from ltx_pipelines.engine.guided import GuidedInputs, guided_prompt_call
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.engine.source_latents import encode_audio_latent
from ltx_pipelines.engine.two_stage_runner import run_two_stages
from ltx_pipelines.io import read_audio
from ltx_pipelines.pipelines.guided import DEFAULT_GUIDANCE, DEFAULT_VIDEO, TwoStageGuidedPipeline


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


class A2VidPipelineTwoStage(TwoStageGuidedPipeline):
    """Video for a given audio track: full checkpoint, x2 upsampler, distilled LoRA (stage 2) and Gemma.

    Call with a prompt, `audio=AudioInput(...)` and the `video` / `guidance` requests (no audio guidance: the
    audio is frozen) or drive `latents_from_contexts` directly. Constructed as `TwoStageGuidedPipeline`.
    """

    guided_modalities = ("video",)  # the audio is frozen

    def guided_stage_denoiser(self, transformer: nn.Module, inputs: GuidedInputs) -> GuidedDenoiser:
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

    def generate(  # type: ignore[override]
        self,
        prompt: str,
        *,
        audio: AudioInput,
        seed: int,
        video: VideoRequest = DEFAULT_VIDEO,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """The final latents of the video for `audio` from a prompt; the same seed and requests give the same
        result."""
        video = self.checked_video(video)
        self.guidance_settings(guidance)  # a bad value fails before Gemma runs
        return guided_prompt_call(
            self, prompt, seed=seed, images=video.images, enhance_prompt=enhance_prompt, guidance=guidance,
            audio=audio, video=video,
        )  # fmt: skip

    def latents_from_contexts(  # type: ignore[override]
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        audio: AudioInput,
        video: VideoRequest,
        noise: NoiseSource,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
    ) -> FinalLatents:
        """Both stages' final latents from given contexts, the audio and a noise source (the parity seam)."""
        if video.generated_keyframes:
            raise ValueError("A2VidPipelineTwoStage generates no keyframes: leave video.generated_keyframes at 0")
        run = self.guided_run(contexts, negative_contexts, video, noise, guidance, stage_sigmas)
        full, inputs = run.shape, run.inputs
        stage_1, stage_2 = self.stage_plans(run)

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
            self, self.spatial_upsampler_path, full, noise, stage_1=stage_1, stage_2=stage_2,
            stage_1_denoiser=lambda transformer: self.guided_stage_denoiser(transformer, inputs),
            refine_contexts=inputs.positive, images=video.images, frozen_audio=audio_latent,
        )  # fmt: skip
        latents = {"encoded_audio_latent": audio_latent, **result.latents}

        # The input track itself (cut to the video) is shipped, not the VAE's reconstruction of it; a saved
        # latents file keeps it too, so `ltx_pipelines.decode` writes the same sound.
        final = finished_latents(self, full, result.stage_2.video_latent, audio_latent, noise, latents)
        track = Waveform(audio.first_seconds(duration).float(), audio.sample_rate)
        return replace(final, shipped_audio=track)


@dataclass(frozen=True)
class AudioRequest:
    """The audio-input flags, checked: the file, where in it the audio starts, and at most how long."""

    path: Path
    start_time: float
    max_duration: float | None
    """None: the video's duration."""
