"""Lip-dub (Dub-It) video-to-video, distilled two-stage: `python -m ltx_pipelines.lipdub`.

One lip-dub IC-LoRA (`--lora`, exactly once) is fused into the distilled transformer used by both
stages. The `--reference-video` conditions both: its frames as IC reference tokens (at
`--reference-strength`), and its audio track, VAE-encoded, as reference audio tokens placed just
before the clip's start (negative times), so the new speech follows the reference's timing. The
frame count is the reference's, snapped down to 8k+1; the frame rate is its container's. Stage 2
refines the video with the stage-1 audio held fixed; the stage-1 audio is the one written.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.command import PipelineCommand, Run, build_distilled, forward_to
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading, fields_of
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.cli.request_flags import checked_size, size_flags
from ltx_pipelines.cli.runtime_flags import TilingFlags
from ltx_pipelines.engine.model_versions import DEFAULT_REFERENCE_STRENGTH, TWO_STAGE_SPATIAL_MULTIPLE

if TYPE_CHECKING:
    from ltx_pipelines.engine.denoising_stage import FinalLatents
    from ltx_pipelines.pipelines.lipdub import LipDubPipeline


@dataclass(frozen=True)
class LipDubInputs:
    """The lip-dub flags, checked: the output size and the reference clip with its timing."""

    height: int
    width: int
    reference: Path
    reference_video: str
    """`--reference-video` as typed (the sidecar records it)."""
    num_frames: int
    frame_rate: float
    reference_strength: float


class LipDubFlags(FlagGroup["LipDubInputs"]):
    """Output size and the reference clip (frame count and rate come from the reference)."""

    sections = (
        FlagSection(
            "lip-dub",
            (
                *size_flags(TWO_STAGE_SPATIAL_MULTIPLE, ("{two_stage_height}", "{two_stage_width}"), noun="Video {}"),
                Flag(
                    "--reference-video",
                    {
                        "type": str,
                        "required": True,
                        "help": "The clip to dub: its frames are the IC reference and its audio track the reference "
                        "audio. The output has its frame count (snapped down to 8k+1) and its container's frame rate "
                        "(required).",
                    },
                ),
                Flag(
                    "--reference-strength",
                    {
                        "type": float,
                        "default": DEFAULT_REFERENCE_STRENGTH,
                        "help": "How clean the reference video tokens are, in [0, 1] (default: "
                        f"{DEFAULT_REFERENCE_STRENGTH}).",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[LipDubInputs]:
        from ltx_pipelines.io import MediaError, probe_video
        from ltx_pipelines.pipelines.lipdub import reference_timing

        defaults = context.defaults
        sizes = checked_size(args, TWO_STAGE_SPATIAL_MULTIPLE, (defaults.two_stage_height, defaults.two_stage_width))
        loras = context.values[ModelFlags].loras
        if len(loras) != 1 and not (context.demo and not loras):
            raise FlagError(
                f"--lora was given {len(loras)} times; the lip-dub pipeline takes exactly one lip-dub IC-LoRA "
                "(--lora PATH [STRENGTH])"
            )
        strength = args.reference_strength
        if not (math.isfinite(strength) and 0.0 <= strength <= 1.0):
            raise FlagError(f"--reference-strength {strength} is not accepted: it must be in [0, 1]")
        raw = args.reference_video
        path = Path(raw).expanduser()
        if not path.is_file():
            raise FlagError(
                f"--reference-video {raw!r}: no such file"
                if not path.exists()
                else f"--reference-video {raw!r} is not a file"
            )
        try:
            info = probe_video(path)
            num_frames, fps = reference_timing(path)
        except MediaError as e:
            raise FlagError(f"--reference-video {raw!r} is not a video that can be decoded: {e}") from None
        if not info.has_audio:
            raise FlagError(f"--reference-video {raw!r} has no audio track; the lip-dub reference needs its speech")
        value = LipDubInputs(sizes[0], sizes[1], path, raw, num_frames, fps, strength)
        # The value depends on the model files: settled once they are known.
        return Reading(value, record=self._record(value), settle=True)

    def settle(self, value: LipDubInputs, models: RunModels, context: ReadContext) -> Reading[LipDubInputs]:
        value = self._settled(value, models, context)
        return Reading(value, record=self._record(value))

    def _settled(self, value: LipDubInputs, models: RunModels, context: ReadContext) -> LipDubInputs:
        from ltx_pipelines.engine.ic_references import reference_factors

        try:
            reference_factors(list(models.loras))
        except ValueError as e:
            raise FlagError(f"--lora: {e}") from None
        return value

    def _record(self, value: LipDubInputs) -> dict[str, Any]:
        return fields_of(value, "height", "width", "reference_video", "reference_strength")


def generate_lip_dub(pipeline: LipDubPipeline, run: Run) -> FinalLatents:
    """The prompt call with the lip-dub group's settings (shared with `ltx_pipelines.dubit`)."""
    from ltx_pipelines.engine.ic_references import VideoReference
    from ltx_pipelines.pipelines.lipdub import LipDubReference

    inputs = run[LipDubFlags]
    from ltx_pipelines.engine.requests import VideoRequest

    video = VideoRequest(
        height=inputs.height, width=inputs.width, num_frames=inputs.num_frames, frame_rate=inputs.frame_rate
    )
    return pipeline.generate(
        run.prompt.text,
        seed=run.prompt.seed,
        video=video,
        enhance_prompt=run.prompt.enhance,
        reference=LipDubReference(VideoReference(inputs.reference_strength, inputs.reference)),
    )


def lip_dub_command(
    module_name: str,
    doc: str | None,
    pipeline: str,
    *,
    lora_keyword: str,
    lora_name: str,
    demo_families: tuple[str, ...],
    demo_ic_lora: str | None = None,
) -> PipelineCommand[Any]:
    """The command line of a lip-dub module (`lipdub` for LTX-2.3, `dubit` for LTX-2.5): `pipeline` is its
    pipeline class (`module:Class`, imported once the flags are checked), which takes its IC-LoRA as the keyword
    `lora_keyword`; `--lora` names that one IC-LoRA (with --demo on the LTX-2.5 files and no `--lora`: the demo
    set's `demo_ic_lora`)."""
    return PipelineCommand.for_module(
        module_name,
        doc,
        models=ModelFlags.distilled_two_stage(
            demo_families=demo_families,
            demo_ic_lora=demo_ic_lora,
            lora_help=(
                f"The {lora_name} IC-LoRA, fused into the transformer of both stages, with an optional strength "
                "(default 1.0); exactly once (required; optional with --demo)."
            ),
        ),
        groups=(LipDubFlags(), TilingFlags(size_from=LipDubFlags)),
        # --lora names the IC-LoRA here, not plain LoRAs.
        build=lambda run: build_distilled(
            pipeline, run, loras=(), **{lora_keyword: run.models.loras[0] if run.models.loras else None}
        ),
        generate=generate_lip_dub,
    )


COMMAND = lip_dub_command(
    __name__,
    __doc__,
    "ltx_pipelines.pipelines.lipdub:LipDubPipeline",
    lora_keyword="lip_dub_lora",
    lora_name="lip-dub",
    demo_families=("ltx-2.3",),  # the LTX-2.5 name of this pipeline is ltx_pipelines.dubit
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.lipdub")


if __name__ == "__main__":
    sys.exit(main())
