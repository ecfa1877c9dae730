"""The pipeline class of `python -m ltx_pipelines.t2a_one_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, finished_latents, run_denoising_stage
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.pipelines.guided import (
    GuidedPipeline,
    GuidedRun,
    checked_stream_request,
)

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

    def checked_video(self, video: VideoRequest) -> VideoRequest:
        """`video` checked (no picture: no images, no keyframes, no predicted length) and its length and rate
        filled; its size is not used."""
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

    def denoise(self, run: GuidedRun) -> FinalLatents:
        """The guided audio stage's latent (the video request gives only the length)."""
        checked_stream_request(run.video, type(self).__name__, refuse=("images", "generated_keyframes"))
        # No video stream: the cross-modal (isolation) pass does not exist, whatever modality_scale says.
        (loras,) = self.stage_loras()
        with self.transformer(loras) as transformer:
            result = run_denoising_stage(
                self.guided_stage_denoiser(transformer, run.inputs), run.shape, run.stage_1_sigmas(self), run.noise,
                "stage_1", self.placement.device, self.placement.dtype, with_video=False, progress=self.progress,
            )  # fmt: skip
        assert result.audio_latent is not None
        return finished_latents(self, run.shape, None, result.audio_latent, run.noise, result.latents)

    def output_shape(self, height: int, width: int, num_frames: int, frame_rate: float) -> VideoPixelShape:
        """The audio run's shape: the request's size is not used (no picture), only its length and rate."""
        return self.audio_shape(num_frames, frame_rate)
