"""HQ two-stage text/image-to-video+audio (res2s sampler): `python -m ltx_pipelines.ti2vid_two_stages_hq`.

The two-stage flow of `ti2vid_two_stages` with the second-order res2s sampler on both stages, the
distilled LoRA fused into both transformers (lightly into the guided stage 1, default strengths
0.25 and 0.5), stage-1 sigmas shifted for the stage-1 latent's token count, and the HQ preset
(15 steps, 1088x1920 output, STG off) whatever the checkpoint's generation.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.sampling import res2s_denoising_loop
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader import LoraSpec
from ltx_core.types import VideoLatentShape, VideoPixelShape
from ltx_pipelines.cli.arg_types import finite_float
from ltx_pipelines.cli.command import Run
from ltx_pipelines.cli.flag_group import FlagGroup, ReadContext
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.engine.defaults import (
    DEFAULT_LORA_STRENGTH,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
    LTX_2_3_HQ_DEFAULTS,
    PipelineDefaults,
)
from ltx_pipelines.engine.guided import GuidanceSettings
from ltx_pipelines.engine.noise import NoiseSource
from ltx_pipelines.engine.prompt_pipeline import GuidedOptions
from ltx_pipelines.engine.stages import SamplingLoop
from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)

# The reference runs res2s with its default SDE noise seed (not the run's seed): the step noise
# generator starts from this seed and the substep one from it + 10000, on the run's device.
RES2S_NOISE_SEED = -1


class TI2VidTwoStagesHQPipeline(TI2VidTwoStagesPipeline):
    """The HQ variant: res2s on both stages, the distilled LoRA in both, token-count-shifted sigmas.

    `distilled_lora` is the LoRA file (or a LoraSpec, whose key rules are kept and strength replaced
    by the per-stage strengths); None runs both stages without it (the demo).
    """

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        distilled_lora: LoraSpec | str | Path | None,
        distilled_lora_strength_stage_1: float = HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
        distilled_lora_strength_stage_2: float = HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
        sde_noise_seed: int = RES2S_NOISE_SEED,
        **options: Unpack[GuidedOptions],
    ) -> None:
        """`sde_noise_seed` seeds res2s's own SDE generators (not the run's seed, as in the reference).
        `options`: see `GuidedOptions`."""
        spec = distilled_lora if isinstance(distilled_lora, LoraSpec) or distilled_lora is None else None
        if spec is None and distilled_lora is not None:
            spec = LoraSpec(Path(distilled_lora))
        super().__init__(checkpoint_path, spatial_upsampler_path, gemma_root, distilled_lora=spec, **options)
        self.distilled_lora_strengths = (float(distilled_lora_strength_stage_1), float(distilled_lora_strength_stage_2))
        self.sde_noise_seed = sde_noise_seed

    def default_settings(self) -> PipelineDefaults:
        return LTX_2_3_HQ_DEFAULTS

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], tuple[LoraSpec, ...]]:
        if self.distilled_lora is None:
            return self.loras, self.loras
        stage_1, stage_2 = (
            (*self.loras, dataclasses.replace(self.distilled_lora, strength=strength))
            for strength in self.distilled_lora_strengths
        )
        return stage_1, stage_2

    def default_stage_1_sigmas(self, settings: GuidanceSettings, stage_1_shape: VideoPixelShape) -> torch.Tensor:
        # Unlike the other pipelines, HQ shifts the schedule for the stage-1 latent's token count.
        latent_shape = VideoLatentShape.from_pixel_shape(stage_1_shape)
        return LTX2Scheduler().sigmas(settings.num_inference_steps, tokens=latent_shape.token_count)

    def sampling_loop(self, stage: str, sde_noise: NoiseSource | None) -> SamplingLoop:
        # Fresh SDE generators per stage (seeded `sde_noise_seed`, as the reference), unless a
        # noise source is given: its draws are named `<stage>.res2s.<step>.<substep|step>.<modality>`.
        return functools.partial(
            res2s_denoising_loop, noise_seed=self.sde_noise_seed, noise=sde_noise, noise_name_prefix=f"{stage}."
        )


@dataclass(frozen=True)
class HqLoraStrengths:
    stage_1: float
    stage_2: float


class HqLoraStrengthFlags(FlagGroup[HqLoraStrengths]):
    """The HQ pipeline's per-stage strengths of the distilled LoRA (fused into both stages)."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("distilled LoRA strengths (HQ)")
        for stage, default in ((1, HQ_DISTILLED_LORA_STRENGTH_STAGE_1), (2, HQ_DISTILLED_LORA_STRENGTH_STAGE_2)):
            group.add_argument(
                f"--distilled-lora-strength-stage-{stage}",
                type=finite_float,
                default=default,
                metavar="STRENGTH",
                help=(
                    f"Strength of the distilled LoRA fused into the stage-{stage} transformer; replaces the "
                    f"STRENGTH of --distilled-lora (default: {default})."
                ),
            )

    def read(self, args: argparse.Namespace, context: ReadContext) -> HqLoraStrengths:
        return HqLoraStrengths(args.distilled_lora_strength_stage_1, args.distilled_lora_strength_stage_2)

    def record(self, value: HqLoraStrengths) -> dict[str, Any]:
        return {"distilled_lora_strength_stage_1": value.stage_1, "distilled_lora_strength_stage_2": value.stage_2}


def build_hq(run: Run, pipeline_class: type[TI2VidTwoStagesHQPipeline] = TI2VidTwoStagesHQPipeline, **extra: Any):
    """The HQ pipeline of a checked run; the distilled LoRA's own STRENGTH is replaced by the per-stage ones."""
    distilled = run.models.distilled_lora
    if distilled is not None and distilled.strength != DEFAULT_LORA_STRENGTH:
        logger.warning(
            "--distilled-lora STRENGTH %g is not used by the HQ pipeline; it fuses the LoRA at "
            "--distilled-lora-strength-stage-1 / -stage-2 instead",
            distilled.strength,
        )
    strengths = run[HqLoraStrengthFlags]
    return build_guided(
        pipeline_class,
        run,
        distilled_lora_strength_stage_1=strengths.stage_1,
        distilled_lora_strength_stage_2=strengths.stage_2,
        **extra,
    )


COMMAND = guided_command(
    __name__,
    __doc__,
    build_hq,
    two_stage=True,
    groups=(HqLoraStrengthFlags(),),
    # The HQ command line always shows and uses the HQ preset, whatever the checkpoint's generation.
    fixed_defaults=LTX_2_3_HQ_DEFAULTS,
)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
