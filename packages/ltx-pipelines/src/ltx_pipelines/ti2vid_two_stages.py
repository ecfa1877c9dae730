"""Two-stage text/image-to-video+audio with a full checkpoint: `python -m ltx_pipelines.ti2vid_two_stages`.

Stage 1 runs guided at half resolution (LTX-2 scheduler sigmas, Euler); the video latent is
upsampled x2; stage 2 rebuilds the transformer with the distilled LoRA fused in and refines at full
resolution with the 3 stage-2 distilled sigmas and no guidance. Stage 2 also denoises the
re-noised stage-1 audio alongside the video (the video attends to it) but the stage-1 audio is the
one decoded, as in the reference.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import LTX2Scheduler, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec, StateDictCache
from ltx_core.model.transformer import X0Model
from ltx_core.types import VideoPixelShape
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.engine.defaults import TWO_STAGE_SPATIAL_MULTIPLE
from ltx_pipelines.engine.file_steps import encode_conditioning_images, upsample_between_stages
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.guided import GuidanceSettings, GuidedPipeline, GuidedRun
from ltx_pipelines.engine.prompt_pipeline import GuidedOptions
from ltx_pipelines.engine.stages import run_denoising_stage

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)


class TI2VidTwoStagesPipeline(GuidedPipeline):
    """Guided half-resolution stage 1, x2 latent upsampling, distilled-LoRA stage 2 at full resolution.

    `loras` are fused into both stages, `distilled_lora` into stage 2 only. Without a distilled LoRA
    (the demo) stage 2 runs the plain full model, which is not what it was tuned for.
    Subclasses change the sampler, the stage-1 sigmas and which LoRAs each stage gets through
    `sampling_loop`, `default_stage_1_sigmas` and `stage_loras`.
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE
    stage_names = ("stage_1", "stage_2")
    images_as_keyframes: ClassVar[bool] = False
    """Every image (frame 0 too) is appended as guiding keyframe tokens rather than replacing frame 0."""
    shipped_audio_stage: ClassVar[str] = "stage_1"
    """Whose audio latent is decoded: the stage-1 one (the reference's choice here) or `stage_2`."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        distilled_lora: LoraSpec | None,
        **options: Unpack[GuidedOptions],
    ) -> None:
        """`options`: see `GuidedOptions`."""
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.distilled_lora = distilled_lora
        if distilled_lora is None:
            logger.warning("no distilled LoRA: stage 2 refines with the plain full model")

    # ---- what differs between the two-stage variants ----------------------------------------------

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], tuple[LoraSpec, ...]]:
        """LoRAs fused into the stage-1 and the stage-2 transformer."""
        distilled = () if self.distilled_lora is None else (self.distilled_lora,)
        return self.loras, (*self.loras, *distilled)

    def default_stage_1_sigmas(self, settings: GuidanceSettings, stage_1_shape: VideoPixelShape) -> torch.Tensor:
        # As in the reference, the scheduler is not told the latent size: default token count.
        return LTX2Scheduler().sigmas(settings.num_inference_steps)

    def default_stage_2_sigmas(self) -> torch.Tensor:
        return stage_2_distilled_sigmas()

    # ---- the flow ----------------------------------------------------------------------------------

    def run_stages(self, run: GuidedRun) -> Generation:
        full = run.shape
        half = VideoPixelShape(1, full.frames, full.height // 2, full.width // 2, full.fps)
        settings = run.inputs.settings
        stage_1_sigmas = run.sigmas("stage_1", lambda: self.default_stage_1_sigmas(settings, half))
        stage_2_sigmas = run.sigmas("stage_2", self.default_stage_2_sigmas)
        device, dtype = self.placement.device, self.placement.dtype
        loras_1, loras_2 = self.stage_loras()

        encoded = encode_conditioning_images(
            run.images,
            self.checkpoint_path,
            self.placement,
            [half, full],
            keep_latent_statistics=True,
            all_as_keyframes=self.images_as_keyframes,
        )
        stage_1_items, stage_2_items = encoded.per_stage
        assert encoded.latent_statistics is not None

        # On the CPU both transformer builds share one cache: the module weights are the cached tensors,
        # so the file is read once at no extra memory, and each build fuses its LoRAs into new tensors.
        # On an accelerator the cache would pin a whole host copy of the transformer (~44 GB for the 22B
        # in bf16) across stage 1, so stage 2 reads the file again (usually from the OS page cache).
        cache = StateDictCache() if device.type == "cpu" else None
        latents: dict[str, torch.Tensor] = {}
        with self.transformer(loras_1, cache) as transformer:
            denoiser = self.guided_stage_denoiser(transformer, run.inputs)
            stage_1 = run_denoising_stage(
                denoiser, half, stage_1_sigmas, run.noise, "stage_1", device, dtype,
                conditionings=stage_1_items, loop=self.sampling_loop("stage_1", run.sde_noise),
                progress=self.progress,
            )  # fmt: skip
        latents.update(stage_1.named("stage_1"))

        upsampled = upsample_between_stages(
            stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
        )
        latents["upsampled_video_latent"] = upsampled

        with self.transformer(loras_2, cache) as transformer:
            if cache is not None:
                cache.clear()  # the stage-2 model holds every weight it needs
            refiner = X0Model(self.refinement_transformer(transformer, full))
            denoiser = SimpleDenoiser(refiner, run.inputs.positive.video, run.inputs.positive.audio)
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_sigmas, run.noise, "stage_2", device, dtype,
                conditionings=stage_2_items, initial_video=upsampled, initial_audio=stage_1.audio_latent,
                loop=self.sampling_loop("stage_2", run.sde_noise), progress=self.progress,
            )  # fmt: skip
        latents.update(stage_2.named("stage_2"))

        # By default stage 2 only refines the video: its audio pass is discarded and the stage-1 audio shipped.
        refined_audio = self.shipped_audio_stage == "stage_2" and self.refined_audio_is_usable
        audio = stage_2.audio_latent if refined_audio else stage_1.audio_latent
        return self.decoded(full, stage_2.video_latent, audio, run.noise, latents)


COMMAND = guided_command(__name__, __doc__, lambda run: build_guided(TI2VidTwoStagesPipeline, run), two_stage=True)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
