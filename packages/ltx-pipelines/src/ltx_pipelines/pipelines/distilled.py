"""The pipeline class of `python -m ltx_pipelines.distilled`
(what it does: that module's docstring)."""

from __future__ import annotations

from dataclasses import replace

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import AncestralSampler, FinalLatents, NoiseSource, contexts_on
from ltx_pipelines.engine.prompt_pipeline import TwoStagePromptPipeline
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.engine.two_stage_runner import StagePlan, two_stage_latents

ANCESTRAL_SAMPLER_SINCE_VERSION = (2, 5)


"""From this model version on (LTX-2.5), stage 1 samples with Euler ancestral (eta 1, s_noise 1, its own noise
stream); stage 2 stays Euler."""


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
        call = self.prompted(prompt, seed=seed, video=video, enhance_prompt=enhance_prompt)
        final = self.latents_from_contexts(call.contexts, video=call.video, noise=call.noise)
        return replace(final, prompt=call.prompt)

    def latents_from_contexts(self, contexts: TextContexts, *, video: VideoRequest, noise: NoiseSource) -> FinalLatents:
        """Both stages, from given text contexts, a filled `video` request and a noise source (the parity seam).
        `video.generated_keyframes`: slots appended to stage 1 only, kept as `stage_1.video_generated_keyframes`."""
        full = video.pixel_shape(self.spatial_multiple)
        positive = contexts_on(contexts, self.placement)
        ancestral = self.checkpoint.model_version >= ANCESTRAL_SAMPLER_SINCE_VERSION
        # One transformer serves both stages (the same LoRAs), kept loaded across the upsampling.
        return two_stage_latents(
            self, self.spatial_upsampler_path, full, noise, ship_refined_audio=True,
            stage_1=StagePlan(self.loras, distilled_sigmas(), sampler=AncestralSampler() if ancestral else None),
            stage_2=StagePlan(self.loras, stage_2_distilled_sigmas()), refine_contexts=positive, images=video.images,
            generated_keyframes=video.generated_keyframes, share_transformer=True,
        )  # fmt: skip
