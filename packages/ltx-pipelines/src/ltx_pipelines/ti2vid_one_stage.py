"""One-stage text/image-to-video+audio with a full checkpoint: `python -m ltx_pipelines.ti2vid_one_stage`.

One guided stage at the output resolution: the LTX-2 scheduler's sigmas for the default token
count (30 steps for LTX-2.3 checkpoints, 40 for LTX-2), multi-modal guidance (CFG against the
negative prompt, STG, modality isolation, rescaling) and Euler steps, then decoding.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.cli.args import add_max_batch_size_arg
from ltx_pipelines.cli.runner import ONE_STAGE_LAYOUT, ParsedRun, PipelineCli, run_guided_cli
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.guided import GuidedPipeline
from ltx_pipelines.engine.loaded_stages import encode_conditioning_images
from ltx_pipelines.engine.model_loading import loaded
from ltx_pipelines.engine.noise import NoiseSource
from ltx_pipelines.engine.stages import ImageCondition, run_denoising_stage


class TI2VidOneStagePipeline(GuidedPipeline):
    """One guided stage at full resolution over a full (non-distilled) checkpoint and Gemma.

    Construct with `(checkpoint_path, gemma_root, loras=..., device=..., dtype=...)`; call with a
    prompt (see `GuidedPipeline.__call__`) or drive `generate_from_contexts` directly.
    """


    def generate_from_contexts(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        images: Sequence[ImageCondition] = (),
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        sigmas: torch.Tensor | None = None,
    ) -> Generation:
        """The stage and decoding; `sigmas` overrides the scheduler (then the step count is its length - 1)."""
        shape = self.output_shape(height, width, num_frames, frame_rate)
        inputs = self.guided_inputs(contexts, negative_contexts, num_inference_steps, video_guidance, audio_guidance)
        if sigmas is None:
            # No latent is passed to the scheduler here (as in the reference): the shift is the one
            # of the default token count, whatever the resolution.
            sigmas = LTX2Scheduler().sigmas(inputs.settings.num_inference_steps)
        device, dtype = self.placement.device, self.placement.dtype
        (conditionings,) = encode_conditioning_images(images, self.checkpoint_path, self.placement, [shape]).per_stage

        with loaded(AV_TRANSFORMER, self.checkpoint_path, self.placement, loras=self.loras) as transformer:
            denoiser = self.guided_stage_denoiser(transformer, inputs)
            result = run_denoising_stage(
                denoiser, shape, sigmas, noise, "stage_1", device, dtype,
                conditionings=conditionings, progress=self.progress,
            )  # fmt: skip

        latents = {"stage_1.video_latent": result.video_latent, "stage_1.audio_latent": result.audio_latent}
        return self.decoded(shape, result.video_latent, result.audio_latent, noise, latents)


def main(argv: Sequence[str] | None = None) -> int:
    cli = PipelineCli(
        prog="python -m ltx_pipelines.ti2vid_one_stage",
        description=__doc__.splitlines()[0] if __doc__ else None,
        layout=ONE_STAGE_LAYOUT,
        extra_args=add_max_batch_size_arg,
    )

    def build(run: ParsedRun) -> TI2VidOneStagePipeline:
        return TI2VidOneStagePipeline(
            run.checkpoint_path,
            run.gemma_root,
            loras=run.lora_specs,
            device=run.config.device,
            dtype=run.config.dtype,
            tiling=run.config.tiling,
            max_batch_size=run.config.max_batch_size,
        )

    return run_guided_cli(cli, argv, build)


if __name__ == "__main__":
    sys.exit(main())
