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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltx_core.components.denoisers import GuidedDenoiser, SimpleDenoiser
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import stage_2_distilled_sigmas
from ltx_core.conditioning import FrozenModality
from ltx_core.loader import StateDictCache
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import AudioLatentShape, VideoPixelShape
from ltx_pipelines.cli.command import Run
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.cli.guidance_flags import GuidanceFlags
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.cli.media_inputs import audio_duration, audio_file
from ltx_pipelines.cli.video_flags import VideoFlags
from ltx_pipelines.engine.defaults import PipelineDefaults
from ltx_pipelines.engine.file_steps import (
    decode_tiling_for,
    encode_conditioning_images,
    upsample_between_stages,
)
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.guided import GuidedRun
from ltx_pipelines.engine.noise import NoiseSource, fork_noise
from ltx_pipelines.engine.source_latents import encode_audio_latent
from ltx_pipelines.engine.stages import ImageCondition, run_denoising_stage
from ltx_pipelines.media import read_audio
from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AudioInput:
    """The conditioning audio: a waveform (channels, N) float in [-1, 1] at `sample_rate` Hz."""

    waveform: torch.Tensor
    sample_rate: int

    def __post_init__(self) -> None:
        wave = self.waveform
        if wave.dim() == 3 and wave.shape[0] == 1:
            object.__setattr__(self, "waveform", wave[0])
        if self.waveform.dim() != 2 or self.waveform.shape[-1] == 0:
            raise ValueError(
                f"audio waveform must be (channels, samples) or (1, channels, samples), got {tuple(wave.shape)}"
            )
        if self.waveform.shape[0] > 2:  # the audio VAE and the AAC track are stereo: fold surround into mono
            object.__setattr__(self, "waveform", self.waveform.float().mean(dim=0, keepdim=True))
        if self.sample_rate < 1:
            raise ValueError(f"audio sample_rate must be a positive number of Hz, got {self.sample_rate}")

    @classmethod
    def from_file(cls, path: str | Path, *, start_time: float = 0.0, max_duration: float | None = None) -> AudioInput:
        clip = read_audio(path, start_time=start_time, max_duration=max_duration)
        return cls(clip.waveform, clip.sample_rate)

    def first_seconds(self, seconds: float) -> torch.Tensor:
        """The waveform cut to at most `seconds`."""
        return self.waveform[:, : round(seconds * self.sample_rate)]


@dataclass(frozen=True)
class AudioToVideoRun(GuidedRun):
    audio: AudioInput | None = None


class A2VidPipelineTwoStage(TI2VidTwoStagesPipeline):
    """Video for a given audio track: full checkpoint, x2 upsampler, distilled LoRA (stage 2) and Gemma.

    Call with a prompt and `audio=AudioInput(...)` (see `PromptPipeline.__call__`; `audio_guidance`
    is not accepted: the audio is frozen) or drive `generate_from_contexts` directly.
    """

    def generate_from_contexts(  # type: ignore[override]
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        audio: AudioInput,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        images: Sequence[ImageCondition] = (),
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
    ) -> Generation:
        """Both stages and decoding from given contexts, the audio and a noise source (the parity seam).
        The audio stream is frozen, so its guidance is the no-op one; `audio_guidance` must be None."""
        if audio_guidance is not None:
            raise ValueError("audio-to-video holds the audio frozen: audio_guidance is not accepted")
        unknown = sorted(set(stage_sigmas or {}) - set(self.stage_names))
        if unknown:
            raise ValueError(
                f"stage_sigmas names unknown stage(s) {unknown}; this pipeline has {list(self.stage_names)}"
            )
        run = AudioToVideoRun(
            shape=self.output_shape(height, width, num_frames, frame_rate),
            inputs=self.guided_inputs(
                contexts, negative_contexts, num_inference_steps, video_guidance, MultiModalGuiderParams()
            ),
            noise=noise,
            images=tuple(images),
            stage_sigmas=dict(stage_sigmas or {}),
            audio=audio,
        )
        return self.run_stages(run)

    def prompt_options(self, request: Any) -> tuple[list[str], dict[str, Any]]:
        prompts, options = super().prompt_options(request)
        options.pop("audio_guidance")
        return prompts, options

    def run_stages(self, run: GuidedRun) -> Generation:
        if not isinstance(run, AudioToVideoRun) or run.audio is None:
            raise TypeError("audio-to-video needs its audio: call generate_from_contexts(..., audio=AudioInput(...))")
        full = run.shape
        half = VideoPixelShape(1, full.frames, full.height // 2, full.width // 2, full.fps)
        inputs = run.inputs
        stage_1_sigmas = run.sigmas("stage_1", lambda: self.default_stage_1_sigmas(inputs.settings, half))
        stage_2_sigmas = run.sigmas("stage_2", stage_2_distilled_sigmas)
        device, dtype = self.placement.device, self.placement.dtype
        loras_1, loras_2 = self.stage_loras()

        duration = full.frames / full.fps
        audio_latent = encode_audio_latent(
            self.checkpoint_path,
            self.placement,
            run.audio.waveform,
            run.audio.sample_rate,
            latent_frames=AudioLatentShape.from_duration(1, duration).frames,
        )
        latents: dict[str, torch.Tensor] = {"encoded_audio_latent": audio_latent}
        frozen_audio = [FrozenModality()]  # the encoded latent, given as the initial one, never changes
        encoded = encode_conditioning_images(
            run.images, self.checkpoint_path, self.placement, [half, full], keep_latent_statistics=True
        )
        stage_1_items, stage_2_items = encoded.per_stage
        assert encoded.latent_statistics is not None

        cache = StateDictCache() if device.type == "cpu" else None  # see TI2VidTwoStagesPipeline
        with self.transformer(loras_1, cache) as transformer:
            # The reference's audio guider has no negative context: the negative pass keeps the positive
            # audio context (the video attends to the audio stream under it).
            denoiser = GuidedDenoiser(
                X0Model(transformer),
                inputs.positive.video,
                inputs.positive.audio,
                negative_video_context=None if inputs.negative is None else inputs.negative.video,
                video_guidance=inputs.settings.video,
                audio_guidance=inputs.settings.audio,
                max_batch_size=self.max_batch_size,
            )
            stage_1 = run_denoising_stage(
                denoiser, half, stage_1_sigmas, run.noise, "stage_1", device, dtype,
                conditionings=stage_1_items, audio_conditionings=frozen_audio, initial_audio=audio_latent,
                progress=self.progress,
            )  # fmt: skip
        latents.update(stage_1.named("stage_1"))
        upsampled = upsample_between_stages(
            stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
        )
        latents["upsampled_video_latent"] = upsampled
        with self.transformer(loras_2, cache) as transformer:
            if cache is not None:
                cache.clear()
            denoiser = SimpleDenoiser(X0Model(transformer), inputs.positive.video, inputs.positive.audio)
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_sigmas, run.noise, "stage_2", device, dtype,
                conditionings=stage_2_items, audio_conditionings=frozen_audio, initial_video=upsampled,
                initial_audio=audio_latent, progress=self.progress,
            )  # fmt: skip
        latents.update(stage_2.named("stage_2"))

        # Kept as the run's final latents (saved if decoding fails; `decode` then rebuilds the audio from
        # the frozen latent, not the input file).
        final = FinalLatents(
            video=stage_2.video_latent,
            audio=audio_latent,
            shape=full,
            checkpoint=self.checkpoint_path,
            placement=self.placement,
            tiling=decode_tiling_for(full, self.tiling),
            noise=fork_noise(run.noise),
        )
        return Generation(
            frames=final.decode_frames(),
            num_frames=full.frames,
            height=full.height,
            width=full.width,
            frame_rate=full.fps,
            # The input itself (cut to the video), not the VAE's reconstruction of it.
            audio=run.audio.first_seconds(duration).float(),
            audio_sample_rate=run.audio.sample_rate,
            prompt="",
            latents=latents,
            tiling=final.tiling,
            final=final,
            model_files={"checkpoint": self.checkpoint_path},
        )


@dataclass(frozen=True)
class AudioRequest:
    """The audio-input flags, checked: the file, where in it the audio starts, and at most how long."""

    path: Path
    start_time: float
    max_duration: float | None
    """None: the video's duration."""


class AudioInputFlags(FlagGroup[AudioRequest]):
    """`--audio-path`, `--audio-start-time`, `--audio-max-duration`."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("audio input")
        group.add_argument(
            "--audio-path",
            type=audio_file,
            required=True,
            help="The audio to make the video for: any file with an audio track PyAV decodes (WAV, MP3, FLAC, "
            "M4A, a video with sound, ...).",
        )
        group.add_argument(
            "--audio-start-time",
            type=float,
            default=0.0,
            help="Where in the file the audio starts, in seconds (default: 0.0).",
        )
        group.add_argument(
            "--audio-max-duration",
            type=float,
            default=None,
            help="At most this many seconds of audio are read (default: the video's duration, num_frames / "
            "frame_rate).",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> AudioRequest:
        start, longest = args.audio_start_time, args.audio_max_duration
        if not start >= 0:  # also refuses NaN
            raise FlagError(f"--audio-start-time {start} is not accepted: it must be >= 0 seconds")
        if longest is not None and not longest > 0:
            raise FlagError(f"--audio-max-duration {longest} is not accepted: it must be a positive number of seconds")
        length = audio_duration(args.audio_path)
        if start >= length:
            raise FlagError(f"--audio-start-time {start}: {str(args.audio_path)!r} has only {length:.3f} s of audio")
        video = context.value(VideoFlags)
        wanted = video.seconds if longest is None else min(longest, video.seconds)
        if length - start < wanted - 1 / video.frame_rate:  # a run that goes on, but not as asked: say so
            logger.warning(
                "%r has %.3f s of audio after --audio-start-time %g but the video lasts %.3f s: the rest of the "
                "soundtrack is silence", str(args.audio_path), length - start, start, wanted,
            )  # fmt: skip
        return AudioRequest(args.audio_path, start, longest)

    def record(self, value: AudioRequest) -> dict[str, Any]:
        return {
            "audio_path": value.path,
            "audio_start_time": value.start_time,
            "audio_max_duration": value.max_duration,
        }


def _generate(pipeline: A2VidPipelineTwoStage, run: Run) -> Generation:
    request = run[AudioInputFlags]
    options = run.video_call()
    options.pop("audio_guidance")  # the audio is frozen: only the video is guided
    longest = run.video.seconds if request.max_duration is None else request.max_duration
    audio = AudioInput.from_file(request.path, start_time=request.start_time, max_duration=longest)
    return pipeline(run.prompt.text, audio=audio, **options)


COMMAND = guided_command(
    __name__,
    __doc__,
    lambda run: build_guided(A2VidPipelineTwoStage, run),
    two_stage=True,
    guidance=GuidanceFlags(audio=False),
    groups=(AudioInputFlags(),),
    generate=_generate,
)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
