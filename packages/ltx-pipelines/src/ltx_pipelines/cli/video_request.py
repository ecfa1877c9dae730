"""The `VideoRequest` a command line's call arguments ask for, for the pipelines that take request values: the
video group's keywords (size, length or duration range, frame rate, images) and the generated keyframes
gathered into one `video=` value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltx_pipelines.cli.command import Run
    from ltx_pipelines.engine.final_latents import FinalLatents

VIDEO_FIELDS = ("height", "width", "num_frames", "frame_rate", "images", "generated_keyframes", "duration")


def with_video_request(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` with the `VideoRequest` fields they set replaced by `video=VideoRequest(...)`."""
    from ltx_pipelines.engine.requests import VideoRequest  # here: `--help` stays light

    rest = {name: value for name, value in arguments.items() if name not in VIDEO_FIELDS}
    fields = {name: arguments[name] for name in VIDEO_FIELDS if name in arguments}
    return {**rest, "video": VideoRequest(**fields)}


def call_with_video_request(pipeline: Any, run: Run) -> FinalLatents:
    """The pipeline's prompt call with the run's call arguments, the video ones as one `VideoRequest`."""
    return pipeline.generate(run.prompt.text, **with_video_request(run.call_arguments()))
