"""Retake: regenerate a time region of a video (and its sound): `python -m ltx_pipelines.retake`.

The source video (`--video-path`: 8k+1 frames, height and width multiples of 32) and its audio track
are VAE-encoded as the initial latents; a temporal region mask gives the tokens whose time span
overlaps [`--start-time`, `--end-time`) seconds the denoise mask 1, every other token keeps its
source value exactly. One stage: the distilled checkpoint with its 8 sigmas and no guidance (the
command line), or - from Python - a full checkpoint with the LTX-2 scheduler and multi-modal guidance.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import sys
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.command import PipelineCommand, Run, call_pipeline, forward_to, resolve
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.guidance_flags import MaxBatchSizeFlags
from ltx_pipelines.cli.media_inputs import video_file
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.runtime_flags import TilingFlags

if TYPE_CHECKING:
    from ltx_pipelines.engine.denoising_stage import FinalLatents
    from ltx_pipelines.pipelines.retake import RetakePipeline, RetakeRequest

logger = logging.getLogger(__name__)


class RetakeFlags(FlagGroup["RetakeRequest"]):
    """The source video and the region; the output's size, length and rate come from the source."""

    sections = (
        FlagSection(
            "retake",
            (
                Flag(
                    "--video-path",
                    {
                        "type": video_file,
                        "required": True,
                        "help": "The source video: 8k+1 frames, height and width multiples of 32; its audio track "
                        "(if any) is retaken too. The output has its size and frame rate.",
                    },
                ),
                Flag(
                    "--start-time", {"type": float, "required": True, "help": "Start of the region to regenerate (s)."}
                ),
                Flag("--end-time", {"type": float, "required": True, "help": "End of the region to regenerate (s)."}),
                *(
                    Flag(
                        f"--regenerate-{modality}",
                        {
                            "action": argparse.BooleanOptionalAction,
                            "default": True,
                            "help": f"Regenerate the {modality} inside the region; --no-regenerate-{modality} keeps "
                            "all of it (default: on).",
                        },
                    )
                    for modality in ("video", "audio")
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[RetakeRequest]:
        from ltx_pipelines.io import probe_video
        from ltx_pipelines.pipelines.retake import RetakeRegion, RetakeRequest, check_source_shape

        info = probe_video(args.video_path)
        try:
            check_source_shape(info.frames, info.height, info.width)
        except ValueError as e:
            raise FlagError(f"--video-path {str(args.video_path)!r}: {e}") from None
        start, end = args.start_time, args.end_time
        duration = info.frames / info.fps
        if not (math.isfinite(start) and start >= 0):
            raise FlagError(f"--start-time {start} is not accepted: it must be >= 0 seconds")
        if not (math.isfinite(end) and end > start):
            raise FlagError(f"--end-time {end} is not accepted: it must be after --start-time {start}")
        if start >= duration:
            raise FlagError(f"--start-time {start}: the source video lasts only {duration:.3f} s")
        if not (args.regenerate_video or args.regenerate_audio):
            raise FlagError("--no-regenerate-video with --no-regenerate-audio leaves nothing to retake")
        # Runs that change what was asked for go on, but say so.
        if end > duration:
            logger.warning(
                "--end-time %g is past the end of the source video (%.3f s): the region ends with the clip",
                end,
                duration,
            )
        if not info.has_audio and args.regenerate_audio:
            logger.warning(
                "--video-path %r has no audio track: the output's audio is generated for the whole clip, not only "
                "inside the region", str(args.video_path)
            )  # fmt: skip
        region = RetakeRegion(start, end, args.regenerate_video, args.regenerate_audio)
        value = RetakeRequest(video_path=args.video_path, region=region)
        return Reading(value, record=self._record(value), call_arguments=self._call_arguments(value))

    def _record(self, value: RetakeRequest) -> dict[str, Any]:
        return {"video_path": value.video_path, **dataclasses.asdict(value.region)}

    def _call_arguments(self, value: RetakeRequest) -> dict[str, Any]:
        # The source video is read when the call is made (`_retake`), not while reading flags.
        return {"region": value.region}


def _retake(pipeline: RetakePipeline, run: Run) -> FinalLatents:
    from ltx_pipelines.pipelines.retake import RetakeSource

    request = run[RetakeFlags]
    return call_pipeline(pipeline, run, source=RetakeSource.from_file(request.video_path))


COMMAND = PipelineCommand.for_module(
    __name__,
    __doc__,
    models=ModelFlags(distilled=True),
    groups=(TilingFlags(), MaxBatchSizeFlags(), RetakeFlags()),
    build=lambda run: resolve("ltx_pipelines.pipelines.retake:RetakePipeline")(
        run.models.checkpoint,
        run.models.gemma_root,
        distilled=True,
        max_batch_size=run[MaxBatchSizeFlags],
        **run.pipeline_options(),
    ),
    generate=_retake,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.retake")


if __name__ == "__main__":
    sys.exit(main())
