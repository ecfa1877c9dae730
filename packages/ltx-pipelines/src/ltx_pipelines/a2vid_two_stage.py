"""Audio-to-video with a full checkpoint: `python -m ltx_pipelines.a2vid_two_stage`.

The audio track (`--audio-path`, any container PyAV reads, from `--audio-start-time`, at most
`--audio-max-duration` seconds, by default the video's duration) is encoded once by the audio VAE
(resampled to its rate, mixed to stereo), cut to the video's duration and held frozen (never noised,
sigma 0) in both stages: stage 1 generates the video at half resolution under guidance against the
negative prompt, stage 2 refines the x2-upsampled latent with the distilled LoRA. The output muxes
the input waveform segment itself, not a decoded copy.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.command import Run, call_pipeline, forward_to
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.guidance_flags import GuidanceFlags
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.cli.media_inputs import audio_duration, audio_file
from ltx_pipelines.cli.request_flags import VideoFlags

if TYPE_CHECKING:
    from ltx_pipelines.engine.denoising_stage import FinalLatents
    from ltx_pipelines.pipelines.a2vid_two_stage import A2VidPipelineTwoStage, AudioRequest

logger = logging.getLogger(__name__)


class AudioInputFlags(FlagGroup["AudioRequest"]):
    """`--audio-path`, `--audio-start-time`, `--audio-max-duration`."""

    sections = (
        FlagSection(
            "audio input",
            (
                Flag(
                    "--audio-path",
                    {
                        "type": audio_file,
                        "required": True,
                        "help": "The audio to make the video for: any file with an audio track PyAV decodes (WAV, "
                        "MP3, FLAC, M4A, a video with sound, ...).",
                    },
                ),
                Flag(
                    "--audio-start-time",
                    {
                        "type": float,
                        "default": 0.0,
                        "help": "Where in the file the audio starts, in seconds (default: 0.0).",
                    },
                ),
                Flag(
                    "--audio-max-duration",
                    {
                        "type": float,
                        "default": None,
                        "help": "At most this many seconds of audio are read (default: the video's duration, "
                        "num_frames / frame_rate).",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[AudioRequest]:
        from ltx_pipelines.pipelines.a2vid_two_stage import AudioRequest

        start, longest = args.audio_start_time, args.audio_max_duration
        if not start >= 0:  # also refuses NaN
            raise FlagError(f"--audio-start-time {start} is not accepted: it must be >= 0 seconds")
        if longest is not None and not longest > 0:
            raise FlagError(f"--audio-max-duration {longest} is not accepted: it must be a positive number of seconds")
        length = audio_duration(args.audio_path)
        if start >= length:
            raise FlagError(f"--audio-start-time {start}: {str(args.audio_path)!r} has only {length:.3f} s of audio")
        video = context.values[VideoFlags]
        wanted = video.seconds if longest is None else min(longest, video.seconds)
        if length - start < wanted - 1 / video.frame_rate:  # a run that goes on, but not as asked: say so
            logger.warning(
                "%r has %.3f s of audio after --audio-start-time %g but the video lasts %.3f s: the rest of the "
                "soundtrack is silence", str(args.audio_path), length - start, start, wanted,
            )  # fmt: skip
        value = AudioRequest(args.audio_path, start, longest)
        return Reading(value, record=self._record(value))

    def _record(self, value: AudioRequest) -> dict[str, Any]:
        return {
            "audio_path": value.path,
            "audio_start_time": value.start_time,
            "audio_max_duration": value.max_duration,
        }


def _generate(pipeline: A2VidPipelineTwoStage, run: Run) -> FinalLatents:
    from ltx_pipelines.pipelines.a2vid_two_stage import AudioInput

    request = run[AudioInputFlags]
    longest = run.video.seconds if request.max_duration is None else request.max_duration
    audio = AudioInput.from_file(request.path, start_time=request.start_time, max_duration=longest)
    # The audio is frozen: its guidance flags do not exist (GuidanceFlags(audio=False)), only the video is guided.
    return call_pipeline(pipeline, run, audio=audio)


COMMAND = guided_command(
    __name__,
    __doc__,
    lambda run: build_guided("ltx_pipelines.pipelines.a2vid_two_stage:A2VidPipelineTwoStage", run),
    two_stage=True,
    guidance=GuidanceFlags(audio=False),
    groups=(AudioInputFlags(),),
    generate=_generate,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.a2vid_two_stage")


if __name__ == "__main__":
    sys.exit(main())
