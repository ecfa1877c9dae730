"""One-stage text/image-to-video+audio with a full checkpoint: `python -m ltx_pipelines.ti2vid_one_stage`.

One guided stage at the output resolution: the LTX-2 scheduler's sigmas for the default token
count (30 steps for LTX-2.3 checkpoints, 40 for LTX-2), multi-modal guidance (CFG against the
negative prompt, STG, modality isolation, rescaling) and Euler steps, then decoding.

From Python the stage also takes caller-encoded `StageConditions` (`conditions=`): conditioning items
for either modality, initial latents, a frozen modality, or one modality left out (then the result
is an `AudioGeneration` when the video is left out).
"""

from __future__ import annotations

import sys

from ltx_core.components.schedulers import LTX2Scheduler
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.engine.audio_output import AudioGeneration
from ltx_pipelines.engine.file_steps import encode_conditioning_images
from ltx_pipelines.engine.final_latents import decode_audio_from_checkpoint
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.guided import GuidedPipeline, GuidedRun, frozen_streams_keep_positive_context
from ltx_pipelines.engine.stages import run_denoising_stage


class TI2VidOneStagePipeline(GuidedPipeline):
    """One guided stage at full resolution over a full (non-distilled) checkpoint and Gemma.

    Construct with `(checkpoint_path, gemma_root, loras=..., device=..., dtype=..., lora_fusion=...)`;
    call with a prompt (see `PromptPipeline.__call__`) or drive `generate_from_contexts` directly.
    """

    accepts_stage_conditions = True

    def run_stages(self, run: GuidedRun) -> Generation | AudioGeneration:  # type: ignore[override]
        conditions = run.conditions
        if run.images and not conditions.with_video:
            raise ValueError("image conditions need the video stream, but the stage conditions leave it out")
        # No latent is passed to the scheduler here (as in the reference): the shift is the one of the
        # default token count, whatever the resolution.
        sigmas = run.sigmas("stage_1", lambda: LTX2Scheduler().sigmas(run.inputs.settings.num_inference_steps))
        device, dtype = self.placement.device, self.placement.dtype
        (image_items,) = encode_conditioning_images(
            run.images, self.checkpoint_path, self.placement, [run.shape]
        ).per_stage

        (loras,) = self.stage_loras()
        with self.transformer(loras) as transformer:
            denoiser = self.guided_stage_denoiser(
                transformer, frozen_streams_keep_positive_context(run.inputs, conditions)
            )
            result = run_denoising_stage(
                denoiser, run.shape, sigmas, run.noise, "stage_1", device, dtype,
                conditionings=[*image_items, *conditions.video], **conditions.stage_arguments(),
                loop=self.sampling_loop("stage_1", run.sde_noise), progress=self.progress,
            )  # fmt: skip

        if result.video_latent is None:
            assert result.audio_latent is not None
            waveform, rate = decode_audio_from_checkpoint(self.checkpoint_path, self.placement, result.audio_latent)
            return AudioGeneration(audio=waveform, sample_rate=rate, prompt="", latents=result.named("stage_1"))
        return self.decoded(run.shape, result.video_latent, result.audio_latent, run.noise, result.named("stage_1"))


COMMAND = guided_command(
    __name__, __doc__, lambda run: build_guided(TI2VidOneStagePipeline, run), two_stage=False
)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
