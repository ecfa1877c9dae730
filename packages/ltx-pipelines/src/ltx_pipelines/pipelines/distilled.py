"""The pipeline class of `python -m ltx_pipelines.distilled`
(what it does: that module's docstring)."""

from __future__ import annotations

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import (
    FinalLatents,
    NoiseSource,
    contexts_on,
    distilled_stage_1_sampler,
)
from ltx_pipelines.engine.model_versions import checkpoint_model_version
from ltx_pipelines.engine.prompt_pipeline import (
    TwoStagePromptPipeline,
    check_video_length,
)
from ltx_pipelines.engine.requests import (
    VideoRequest,
    generated_keyframe_positions,
    require_keyframe_embedding,
)
from ltx_pipelines.engine.two_stage_runner import StagePlan, run_two_stages, simple_denoiser


class DistilledPipeline(TwoStagePromptPipeline):
    """The distilled pipeline over one distilled checkpoint, an x2 spatial upsampler and Gemma.

    Call it with a prompt (no negative prompt or guidance) or drive
    `generate_from_contexts` directly.
    """

    predicts_duration = True

    def generate(
        self,
        prompt: str,
        *,
        seed: int,
        video: VideoRequest = VideoRequest(),  # noqa: B008 - a frozen value
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """Generate from a prompt (no negative prompt, no guidance); the same seed gives the same result. What
        `video` leaves unset takes the model version's defaults (`filled_video`); a `duration` range (with
        `num_frames` None) has the duration head pick the length from the prompt (LTX-2.5 files with a duration
        head). `video.generated_keyframes`: stage-1 keyframe slots, a count of evenly spaced interior frames or
        explicit frame indices (see `engine.generated_keyframes`; needs a transformer with the keyframe
        embedding)."""
        check_video_length(self.checkpoint_path, video)
        video = self.filled_video(video)
        height, width, frame_rate = video.height, video.width, video.frame_rate
        assert height is not None and width is not None and frame_rate is not None
        self.output_shape(height, width, video.num_frames or 1, frame_rate)
        require_keyframe_embedding(self.checkpoint_path, video.generated_keyframes)
        if video.num_frames is not None:  # a predicted length is checked once the head has picked it
            generated_keyframe_positions(video.generated_keyframes, video.num_frames)
        return self.unguided_prompt_call(prompt, seed=seed, video=video, enhance_prompt=enhance_prompt)

    def latents_from_contexts(self, contexts: TextContexts, *, video: VideoRequest, noise: NoiseSource) -> FinalLatents:
        """Both stages, from given text contexts, a filled `video` request and a noise source (the parity seam).
        `video.generated_keyframes`: slots appended to stage 1 only, kept as `stage_1.video_generated_keyframes`."""
        full = self.output_shape(*video.size)
        positive = contexts_on(contexts, self.placement)
        # LTX-2.5 on samples stage 1 with Euler ancestral (its own noise stream); stage 2 stays Euler.
        stage_1_sampler = distilled_stage_1_sampler(checkpoint_model_version(self.checkpoint_path))
        # One transformer serves both stages (the same LoRAs), kept loaded across the upsampling.
        result = run_two_stages(
            self, self.spatial_upsampler_path, full, noise,
            stage_1=StagePlan(self.loras, distilled_sigmas(), sampler=stage_1_sampler),
            stage_2=StagePlan(self.loras, stage_2_distilled_sigmas()), stage_1_denoiser=simple_denoiser(positive),
            refine_contexts=positive, images=video.images, generated_keyframes=video.generated_keyframes,
            share_transformer=True,
        )  # fmt: skip
        second = result.refined
        audio = second.audio_latent if self.refined_audio_is_usable else result.stage_1.audio_latent
        return self.finished(full, second.video_latent, audio, noise, result.latents)
