"""Command-line media inputs (an audio track, a source video): argparse types that open and decode the file
while the flags are parsed, so a bad file ends with exit code 2 and a message naming the flag and the value
before anything is built."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


# MediaError names the file itself and is passed on as it is.


def _existing_file(raw: str) -> Path:
    path = Path(raw).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{raw!r}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{raw!r} is not a file")
    return path


def audio_duration(path: Path) -> float:
    """Seconds of the first audio track (from the container, else by decoding it)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        if container.duration is not None:
            return container.duration / av.time_base
        return sum(frame.samples for frame in container.decode(stream)) / stream.rate


def audio_file(raw: str) -> Path:
    """argparse type: a file PyAV can open whose first audio track decodes (any container: WAV, MP3,
    FLAC, M4A, a video with sound, ...)."""
    import av

    from ltx_pipelines.io import MediaError, check_decodes

    path = _existing_file(raw)
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise argparse.ArgumentTypeError(f"{raw!r} has no audio track")
            next(container.decode(container.streams.audio[0]))
        check_decodes(path, video=False)  # a damaged packet further on fails here, not mid-run
    except StopIteration:
        raise argparse.ArgumentTypeError(f"{raw!r}: its audio track holds no decodable audio") from None
    except MediaError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    except _open_errors() as e:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an audio or video file FFmpeg can decode: {e}") from None
    return path


def video_file(raw: str) -> Path:
    """argparse type: a video file PyAV can open whose first video stream decodes."""
    from ltx_pipelines.io import MediaError, check_decodes, probe_video

    path = _existing_file(raw)
    try:
        info = probe_video(path)
        check_decodes(path, audio=False)  # the run reads every frame: a damaged one fails here, not mid-run
    except MediaError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    except _open_errors() as e:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a video file FFmpeg can decode: {e}") from None
    if info.frames < 1:
        raise argparse.ArgumentTypeError(f"{raw!r}: its video stream holds no decodable frame")
    return path


def _open_errors() -> tuple[type[BaseException], ...]:
    """What opening a file that is not media raises."""
    import av

    return (av.error.FFmpegError, OSError, ValueError)
