"""The `VideoRequest` a command line's shared flag groups ask for (size, length or duration range, frame rate,
images, generated keyframes), for the pipelines that take request values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltx_pipelines.cli.generated_keyframe_flags import GeneratedKeyframeFlags
from ltx_pipelines.engine.requests import VideoRequest

if TYPE_CHECKING:
    from ltx_pipelines.cli.command import Run


def video_request(run: Run) -> VideoRequest:
    """The run's video flags as a request: with `--auto-duration` the length is left to the duration head."""
    video = run.video
    return VideoRequest(
        height=video.height,
        width=video.width,
        num_frames=None if video.duration is not None else video.num_frames,
        frame_rate=video.frame_rate,
        images=tuple(video.images),
        generated_keyframes=run.values.get(GeneratedKeyframeFlags, 0),
        duration=video.duration,
    )
