"""DFR (LTX-2.5): keyframe slots at half size, full-size detailing, then temporal x2 rounds.

Stage 1 samples the half-size canvas (`engine.dfr_layout.plan_canvas`) with a generated keyframe slot at
the end of every segment. Stage 2 re-samples at full size with the detailing IC-LoRA (the half-size
stage-1 latent as its reference) and the spatially upsampled slots as the slots' start. Each temporal
round x2-upsamples the video in time with the temporal upsampler, cuts it into keyframe-seam tiles and
samples each tile (Euler ancestral, eta 0.5, over the distilled sigmas from 0.975 on) with the known
keyframes as anchors and new slots mid-segment; the tiles are stitched and the clip trimmed to
`(frames - 1) * 2**rounds + 1` frames. The shipped audio is stage 1's.

The model needs the keyframe absolute-position embedding (`use_keyframes_abs_pos_embedding`): without it
the slots would be unmarked tokens, so such a transformer is refused before anything is loaded.

On a distilled transformer every stage runs as it is. On a dev (SFT) transformer, `--distilled-lora` names the
distilled LoRA, fused with the user LoRAs into every stage (stage 1, the detailing stage, the temporal tiles),
as the reference's DFR does on its SFT base.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.command import PipelineCommand, Run, build_distilled, forward_to
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.model_flags import ModelFlags, lora_flag
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.cli.request_flags import VideoFlags
from ltx_pipelines.cli.runtime_flags import TilingFlags
from ltx_pipelines.engine.model_versions import DEFAULT_LORA_STRENGTH, MAX_TEMPORAL_ROUNDS

if TYPE_CHECKING:
    from ltx_core.loader import LoraSpec
    from ltx_pipelines.pipelines.dfr import DFRPipeline


@dataclass(frozen=True)
class DfrInputs:
    """The DFR flags, checked: the detailing IC-LoRA, the temporal upsampler and the number of rounds."""

    detailing_lora: tuple[LoraSpec, ...]
    temporal_upsampler: Path | None
    rounds: int


def _local_file(flag: str, raw: str | Path) -> Path:
    path = Path(raw).expanduser()
    if not path.is_file():
        raise FlagError(f"{flag} {str(raw)!r}: no such file")
    return path


class DfrFlags(FlagGroup[DfrInputs]):
    """`--detailing-lora`, `--temporal-upsampler-path`, `--temporal-upsample-rounds` (the reference's names and
    defaults; DFR places its keyframes itself, so it takes no `--num-generated-keyframes`, as the reference)."""

    sections = (
        FlagSection(
            "DFR",
            (
                lora_flag(
                    "--detailing-lora",
                    default=[],
                    help="The x2 spatial detailing IC-LoRA fused in the full-size pass, with an optional strength "
                    "(default: none, the pass runs without it; with --demo: the demo set's).",
                ),
                Flag(
                    "--temporal-upsampler-path",
                    {
                        "default": None,
                        "help": "The x2 temporal latent upsampler; required when --temporal-upsample-rounds > 0 (with "
                        "--demo: the demo set's).",
                    },
                ),
                Flag(
                    "--temporal-upsample-rounds",
                    {
                        "type": int,
                        "choices": range(MAX_TEMPORAL_ROUNDS + 1),
                        "default": 0,
                        "help": "Temporal x2 rounds: 0 keeps --frame-rate, 1 doubles it (2 tiles), 2 quadruples it (4 "
                        "tiles) (default: 0). The output has (num_frames - 1) * 2**rounds + 1 frames.",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[DfrInputs]:
        from ltx_core.loader import LoraSpec
        from ltx_pipelines.engine import dfr_layout

        loras = tuple(
            LoraSpec(_local_file("--detailing-lora", lora.path), lora.strength) for lora in args.detailing_lora
        )
        upsampler = args.temporal_upsampler_path
        path = _local_file("--temporal-upsampler-path", upsampler) if upsampler is not None else None
        if args.temporal_upsample_rounds and path is None and not context.demo:
            raise FlagError(
                f"--temporal-upsample-rounds {args.temporal_upsample_rounds} needs --temporal-upsampler-path"
            )
        video = context.values[VideoFlags]
        if video.duration is None:
            try:
                dfr_layout.plan_canvas(video.num_frames)
            except ValueError as e:
                raise FlagError(f"--num-frames: {e}") from None
        value = DfrInputs(loras, path, int(args.temporal_upsample_rounds))
        # The value depends on the model files: settled once they are known.
        return Reading(value, record=self._record(value), call_arguments=self._call_arguments(value), settle=True)

    def settle(self, value: DfrInputs, models: RunModels, context: ReadContext) -> Reading[DfrInputs]:
        value = self._settled(value, models, context)
        return Reading(value, record=self._record(value), call_arguments=self._call_arguments(value))

    def _settled(self, value: DfrInputs, models: RunModels, context: ReadContext) -> DfrInputs:
        from ltx_core.loader import LoraSpec
        from ltx_pipelines.engine.requests import keyframe_embedding_problem

        problem = keyframe_embedding_problem(models.checkpoint)
        if problem is not None:
            raise FlagError(f"DFR cannot run on {models.checkpoint}: {problem}")
        if not context.demo:
            return value
        from ltx_pipelines.demo import ensure_demo_assets

        # The LTX-2.5 demo set (DFR's only demo family) ships the detailing IC-LoRA and the temporal upsampler:
        # used where none is given (read() refuses rounds without an upsampler outside --demo).
        assets = ensure_demo_assets(family="ltx-2.5")
        if not value.detailing_lora:
            value = replace(value, detailing_lora=(LoraSpec(assets.detailing_ic_lora),))
        if value.rounds and value.temporal_upsampler is None:
            value = replace(value, temporal_upsampler=assets.temporal_upsampler)
        return value

    def _record(self, value: DfrInputs) -> dict[str, Any]:
        return {
            "detailing_lora": [[str(lora.path), lora.strength] for lora in value.detailing_lora],
            "temporal_upsampler_path": str(value.temporal_upsampler) if value.temporal_upsampler else None,
            "temporal_upsample_rounds": value.rounds,
        }

    def _call_arguments(self, value: DfrInputs) -> dict[str, Any]:
        return {"temporal_upsample_rounds": value.rounds}


def _build(run: Run) -> DFRPipeline:
    from ltx_pipelines.pipelines.dfr import DFRPipeline

    dfr: DfrInputs = run.values[DfrFlags]
    return build_distilled(
        DFRPipeline,
        run,
        detailing_lora=dfr.detailing_lora,
        temporal_upsampler_path=dfr.temporal_upsampler,
        distilled_lora=run.models.distilled_lora,
    )


COMMAND = PipelineCommand.for_module(
    __name__,
    __doc__,
    models=ModelFlags.distilled_two_stage(
        distilled_lora=True,
        # A distilled transformer runs DFR alone; a dev one needs the distilled LoRA (the reference's SFT path).
        distilled_lora_required=False,
        distilled_lora_help=(
            "With a dev (SFT) transformer: the distilled LoRA, fused into every DFR stage (stage 1, the detailing "
            f"stage, the temporal rounds), with an optional strength (default {DEFAULT_LORA_STRENGTH}). Omit it "
            "with a distilled transformer. Example: --distilled-lora distilled-lora.safetensors 0.8"
        ),
        demo_families=("ltx-2.5",),
        # DFR needs the keyframe position embedding, which LTX-2.5 transformers introduced (checked in settle too).
        model_versions=("2.5",),
    ),
    groups=(VideoFlags(two_stage=True, auto_duration=True), DfrFlags(), TilingFlags()),
    build=_build,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.dfr")


if __name__ == "__main__":
    sys.exit(main())
