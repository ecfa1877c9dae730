"""IC-LoRA video-to-video, distilled two-stage: `python -m ltx_pipelines.ic_lora`.

Stage 1 runs at half resolution with the IC-LoRAs (`--lora`, one or more) fused into the distilled
transformer and each `--video-conditioning` reference appended as reference tokens (at the size
and frame rate the LoRA's metadata declares); `--conditioning-attention-mask` limits how much the
generated tokens attend to the reference. Stage 2 refines the x2-upsampled latent at full resolution
without the IC-LoRAs and without the references (image conditionings only); `--skip-stage-2`
returns the stage-1 result at half resolution instead.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.arg_types import RepeatedValuesAction, number_arg
from ltx_pipelines.cli.command import PipelineCommand, Run, build_distilled, call_pipeline, forward_to
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.cli.request_flags import VideoFlags
from ltx_pipelines.cli.runtime_flags import TilingFlags
from ltx_pipelines.engine.model_versions import TWO_STAGE_SPATIAL_MULTIPLE

if TYPE_CHECKING:
    from ltx_pipelines.engine.denoising_stage import FinalLatents
    from ltx_pipelines.engine.ic_references import VideoReference
    from ltx_pipelines.pipelines.ic_lora import ICLoraPipeline


class _PathStrengthAction(RepeatedValuesAction):
    """`FLAG PATH STRENGTH`; appends (path, strength)."""

    display_metavar = "PATH STRENGTH"

    def parse_values(self, values: list[str]) -> tuple[str, float]:
        return values[0], number_arg(self, "STRENGTH", values[1], float)


@dataclass(frozen=True)
class IcLoraInputs:
    """The IC-LoRA flags, checked: the reference videos, the attention mask and whether stage 2 runs."""

    references: tuple[VideoReference, ...]
    mask_path: Path | None
    mask_strength: float
    skip_stage_2: bool
    given: dict[str, Any]
    """The flags as typed (the sidecar records them)."""


class IcLoraFlags(FlagGroup["IcLoraInputs"]):
    """`--video-conditioning`, `--conditioning-attention-mask`, `--skip-stage-2`; read after the video group."""

    sections = (
        FlagSection(
            "IC-LoRA",
            (
                Flag(
                    "--video-conditioning",
                    {
                        "action": _PathStrengthAction,
                        "nargs": 2,
                        "metavar": ("PATH", "STRENGTH"),
                        "default": [],
                        "help": "IC-LoRA reference video and its strength in [0, 1] (1 keeps it clean); repeatable, "
                        "at least one (required). Its first --num-frames frames are used, resized to the stage-1 size "
                        "divided by the LoRA's reference_downscale_factor. Example: --video-conditioning depth.mp4 "
                        "1.0",
                    },
                ),
                Flag(
                    "--conditioning-attention-mask",
                    {
                        "nargs": 2,
                        "metavar": ("MASK", "STRENGTH"),
                        "default": None,
                        "help": "Grayscale mask video or image (pixel values map to [0, 1]) and a strength in [0, 1] "
                        "it is multiplied by: how much each region attends to the reference (0 ignores it). (default: "
                        "none, full attention). Example: --conditioning-attention-mask mask.mp4 0.5",
                    },
                ),
                Flag(
                    "--skip-stage-2",
                    {
                        "action": "store_true",
                        "help": "Stop after stage 1: the output is at half the --height/--width (default: off).",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[IcLoraInputs]:
        from ltx_pipelines.engine.ic_references import VideoReference

        if not args.video_conditioning:
            raise FlagError("--video-conditioning PATH STRENGTH is required (at least one reference video)")
        references = []
        for raw, strength in args.video_conditioning:
            _probe_media("--video-conditioning", raw, image_ok=False)
            references.append(VideoReference(_strength("--video-conditioning", strength), Path(raw)))
        mask_path, mask_strength = None, 1.0
        if args.conditioning_attention_mask is not None:
            raw, strength = args.conditioning_attention_mask
            mask_strength = _strength("--conditioning-attention-mask", strength)
            frames = _probe_media("--conditioning-attention-mask", raw, image_ok=True)
            num_frames = context.values[VideoFlags].num_frames
            if frames != 1 and frames < num_frames:
                raise FlagError(
                    f"--conditioning-attention-mask {raw!r} has {frames} frames; it needs at least --num-frames "
                    f"{num_frames} (or be a single image)"
                )
            mask_path = Path(raw).expanduser()
        given = {
            "video_conditioning": args.video_conditioning,
            "conditioning_attention_mask": args.conditioning_attention_mask,
            "skip_stage_2": args.skip_stage_2,
        }
        value = IcLoraInputs(tuple(references), mask_path, mask_strength, bool(args.skip_stage_2), given)
        # The value depends on the model files: settled once they are known.
        return Reading(value, record=self._record(value), call_arguments=self._call_arguments(value), settle=True)

    def _call_arguments(self, value: IcLoraInputs) -> dict[str, Any]:
        # The mask file is read at the stage-1 size when the call is made (`_generate`), not while reading flags.
        return {
            "references": list(value.references),
            "attention_strength": value.mask_strength,
            "skip_stage_2": value.skip_stage_2,
        }

    def settle(self, value: IcLoraInputs, models: RunModels, context: ReadContext) -> Reading[IcLoraInputs]:
        value = self._settled(value, models, context)
        return Reading(value, record=self._record(value), call_arguments=self._call_arguments(value))

    def _settled(self, value: IcLoraInputs, models: RunModels, context: ReadContext) -> IcLoraInputs:
        """The output size must suit the IC-LoRAs' reference downscale factor (read from the LoRA files)."""
        from ltx_pipelines.engine.ic_references import reference_factors

        try:
            factors = reference_factors(list(models.loras))
        except ValueError as e:
            raise FlagError(f"--lora: {e}") from None
        video = context.values[VideoFlags]
        multiple = TWO_STAGE_SPATIAL_MULTIPLE * factors.downscale
        if video.height % multiple or video.width % multiple:
            raise FlagError(
                f"--height {video.height} / --width {video.width}: with the IC-LoRA's reference_downscale_factor "
                f"{factors.downscale} both must be multiples of {multiple}"
            )
        return value

    def _record(self, value: IcLoraInputs) -> dict[str, Any]:
        return dict(value.given)


def _probe_media(flag: str, raw: str, *, image_ok: bool) -> int:
    """Frames of a readable video (1 for an image when `image_ok`); a bad file raises `FlagError`."""
    from ltx_pipelines.io import MediaError, probe_video, read_image_rgb

    path = Path(raw).expanduser()
    if not path.is_file():
        raise FlagError(f"{flag} {raw!r}: no such file" if not path.exists() else f"{flag} {raw!r} is not a file")
    if image_ok:
        try:
            read_image_rgb(path)
            return 1
        except MediaError:
            pass
    try:
        info = probe_video(path)
    except MediaError as e:
        accepted = "a video or image" if image_ok else "a video"
        raise FlagError(f"{flag} {raw!r} is not {accepted} that can be decoded: {e}") from None
    if info.frames < 1:
        raise FlagError(f"{flag} {raw!r} has no video frames")
    return info.frames


def _strength(flag: str, raw: Any) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise FlagError(f"{flag} STRENGTH {raw!r} is not a number") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise FlagError(f"{flag} STRENGTH {raw} is not accepted: it must be in [0, 1]")
    return value


def _generate(pipeline: ICLoraPipeline, run: Run) -> FinalLatents:
    from ltx_pipelines.engine.ic_references import load_attention_mask

    inputs, video = run[IcLoraFlags], run.video
    mask = None
    if inputs.mask_path is not None:
        assert video.height is not None and video.width is not None
        # The mask weights stage 1, where the references are: load it at the stage-1 size.
        mask = load_attention_mask(inputs.mask_path, video.height // 2, video.width // 2, video.num_frames)
    return call_pipeline(pipeline, run, attention_mask=mask)


COMMAND = PipelineCommand.for_module(
    __name__,
    __doc__,
    models=ModelFlags.distilled_two_stage(
        lora_help=(
            "An IC-LoRA, fused into the stage-1 transformer only, with an optional strength (default 1.0); "
            "repeatable. Its reference_downscale_factor / reference_temporal_scale_factor metadata (default 1) "
            "size the references. Example: --lora ic-lora-depth.safetensors"
        ),
    ),
    groups=(VideoFlags(two_stage=True), TilingFlags(), IcLoraFlags()),
    # As in the reference, --lora names the IC-LoRAs: fused into stage 1 only, not plain LoRAs.
    build=lambda run: build_distilled(
        "ltx_pipelines.pipelines.ic_lora:ICLoraPipeline", run, ic_loras=run.models.loras, loras=()
    ),
    generate=_generate,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.ic_lora")


if __name__ == "__main__":
    sys.exit(main())
