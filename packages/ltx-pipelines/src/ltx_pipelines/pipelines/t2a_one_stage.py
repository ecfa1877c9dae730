"""The pipeline class of `python -m ltx_pipelines.t2a_one_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.guided import GuidedInputs, guided_prompt_call, stage_sigmas_or
from ltx_pipelines.engine.noise_sources import NoiseSource
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.engine.stage_blocks import StageConditions, run_denoising_stage
from ltx_pipelines.pipelines.guided import DEFAULT_GUIDANCE, DEFAULT_VIDEO, GuidedPipeline, checked_stream_request

# The audio grid only depends on the frame count and rate; the stage's (never built) video grid gets
# this smallest valid size.
_PLACEHOLDER_SIZE = 32


class T2AOneStagePipeline(GuidedPipeline):
    """Text to audio over a full (non-distilled) checkpoint and Gemma, with audio-only guidance.

    Construct with `(checkpoint_path, gemma_root, max_batch_size=..., **PipelineOptions)`; call with a
    prompt, `seed`, `video=VideoRequest(num_frames=..., frame_rate=...)` (the length; no picture) and
    optionally `guidance=GuidanceRequest(...)` (audio guidance only), or drive `latents_from_contexts`
    directly. Returns an `AudioGeneration` (`generate` returns the final latents, undecoded).
    """

    transformer_spec = AUDIO_ONLY_TRANSFORMER  # only the audio stream's keys are read from the checkpoint
    guided_modalities = ("audio",)  # no video stream: its guidance is the no-op one (no negative video context)
    takes_stage_conditions = False

    def generate(  # type: ignore[override]
        self,
        prompt: str,
        *,
        seed: int,
        video: VideoRequest = DEFAULT_VIDEO,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """The latent of audio lasting `num_frames / frame_rate` seconds; the same seed gives the same audio."""
        video = self.audio_request(video)
        self.guidance_settings(guidance)  # a bad value fails before Gemma runs
        return guided_prompt_call(
            self, prompt, seed=seed, images=(), enhance_prompt=enhance_prompt, guidance=guidance, video=video
        )

    def audio_request(self, video: VideoRequest) -> VideoRequest:
        """`video` checked (no picture: no images, no keyframes) and its length and rate filled."""
        checked_stream_request(video, type(self).__name__, refuse=("images", "generated_keyframes", "duration"))
        video = self.filled_video(video)
        assert video.num_frames is not None and video.frame_rate is not None
        self.audio_shape(video.num_frames, video.frame_rate)
        return video

    @staticmethod
    def audio_shape(num_frames: int, frame_rate: float) -> VideoPixelShape:
        """The run's (placeholder-sized) pixel shape: it carries the duration the audio grid is made for."""
        if num_frames < 1:
            raise ValueError(f"num_frames must be at least 1, got {num_frames}")
        if not frame_rate > 0:
            raise ValueError(f"frame_rate must be positive, got {frame_rate}")
        return VideoPixelShape(1, num_frames, _PLACEHOLDER_SIZE, _PLACEHOLDER_SIZE, frame_rate)

    def denoise(
        self,
        shape: VideoPixelShape,
        noise: NoiseSource,
        inputs: GuidedInputs,
        given: Mapping[str, torch.Tensor],
        sde_noise: NoiseSource | None,
        video: VideoRequest,
        conditions: StageConditions | None,
    ) -> FinalLatents:
        """The guided audio stage's latent (the video request gives only the length)."""
        checked_stream_request(video, type(self).__name__, refuse=("images", "generated_keyframes"))
        sigmas = stage_sigmas_or(given, "stage_1", lambda: self.default_stage_1_sigmas(inputs.settings, shape))
        # No video stream: the cross-modal (isolation) pass does not exist, whatever modality_scale says.
        (loras,) = self.stage_loras()
        with self.transformer(loras) as transformer:
            denoiser = self.guided_stage_denoiser(transformer, inputs)
            result = run_denoising_stage(
                denoiser, shape, sigmas, noise, "stage_1", self.placement.device, self.placement.dtype,
                with_video=False, progress=self.progress,
            )  # fmt: skip
        assert result.audio_latent is not None
        return self.finished(shape, None, result.audio_latent, noise, result.named("stage_1"))

    def output_shape(self, height: int, width: int, num_frames: int, frame_rate: float) -> VideoPixelShape:
        """The audio run's shape: the request's size is not used (no picture), only its length and rate."""
        return self.audio_shape(num_frames, frame_rate)
