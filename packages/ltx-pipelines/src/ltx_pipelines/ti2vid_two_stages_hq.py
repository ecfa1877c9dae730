"""HQ two-stage text/image-to-video+audio (res2s sampler): `python -m ltx_pipelines.ti2vid_two_stages_hq`.

The two-stage flow of `ti2vid_two_stages` with the second-order res2s sampler on both stages, the
distilled LoRA fused into both transformers (lightly into the guided stage 1, default strengths
0.25 and 0.5), stage-1 sigmas shifted for the stage-1 latent's token count, and the HQ preset
(15 steps, 1088x1920 output, STG off) whatever the checkpoint's generation.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.arg_types import finite_float
from ltx_pipelines.cli.command import Run, forward_to
from ltx_pipelines.cli.flag_group import Flag, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.cli.request_flags import GeneratedKeyframeFlags
from ltx_pipelines.engine.model_versions import (
    DEFAULT_LORA_STRENGTH,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
    LTX_2_3_HQ_DEFAULTS,
)

if TYPE_CHECKING:
    from ltx_pipelines.pipelines.ti2vid_two_stages_hq import HqLoraStrengths, TI2VidTwoStagesHQPipeline

logger = logging.getLogger(__name__)


class HqLoraStrengthFlags(FlagGroup["HqLoraStrengths"]):
    """The HQ pipeline's per-stage strengths of the distilled LoRA (fused into both stages)."""

    sections = (
        FlagSection(
            "distilled LoRA strengths (HQ)",
            tuple(
                Flag(
                    f"--distilled-lora-strength-stage-{stage}",
                    {
                        "type": finite_float,
                        "default": default,
                        "metavar": "STRENGTH",
                        "help": f"Strength of the distilled LoRA fused into the stage-{stage} transformer; replaces "
                        f"the STRENGTH of --distilled-lora (default: {default}).",
                    },
                )
                for stage, default in ((1, HQ_DISTILLED_LORA_STRENGTH_STAGE_1), (2, HQ_DISTILLED_LORA_STRENGTH_STAGE_2))
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[HqLoraStrengths]:
        from ltx_pipelines.pipelines.ti2vid_two_stages_hq import HqLoraStrengths

        value = HqLoraStrengths(args.distilled_lora_strength_stage_1, args.distilled_lora_strength_stage_2)
        return Reading(value, record=self._record(value))

    def _record(self, value: HqLoraStrengths) -> dict[str, Any]:
        return {"distilled_lora_strength_stage_1": value.stage_1, "distilled_lora_strength_stage_2": value.stage_2}


def build_hq(run: Run) -> TI2VidTwoStagesHQPipeline:
    """The HQ pipeline of a checked run; the distilled LoRA's own STRENGTH is replaced by the per-stage ones."""
    from ltx_pipelines.pipelines.ti2vid_two_stages_hq import TI2VidTwoStagesHQPipeline

    distilled = run.models.distilled_lora
    if distilled is not None and distilled.strength != DEFAULT_LORA_STRENGTH:
        logger.warning(
            "--distilled-lora STRENGTH %g is not used by the HQ pipeline; it fuses the LoRA at "
            "--distilled-lora-strength-stage-1 / -stage-2 instead",
            distilled.strength,
        )
    strengths = run[HqLoraStrengthFlags]
    return build_guided(
        TI2VidTwoStagesHQPipeline,
        run,
        distilled_lora_strength_stage_1=strengths.stage_1,
        distilled_lora_strength_stage_2=strengths.stage_2,
    )


COMMAND = guided_command(
    __name__,
    __doc__,
    build_hq,
    two_stage=True,
    groups=(HqLoraStrengthFlags(), GeneratedKeyframeFlags()),
    # The HQ command line always shows and uses the HQ preset, whatever the checkpoint's generation.
    fixed_defaults=LTX_2_3_HQ_DEFAULTS,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.ti2vid_two_stages_hq")


if __name__ == "__main__":
    sys.exit(main())
