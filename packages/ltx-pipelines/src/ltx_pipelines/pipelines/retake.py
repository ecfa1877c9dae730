"""The pipeline class of `python -m ltx_pipelines.retake`
(what it does: that module's docstring)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ltx_core.components.denoisers import Denoiser, SimpleDenoiser
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import distilled_sigmas
from ltx_core.conditioning import ConditioningItem, FrozenModality, TemporalRegionMask
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import DEFAULT_SCALE_FACTORS, AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.engine.denoising_stage import (
    FinalLatents,
    NoiseSource,
    SeededNoise,
    finished_latents,
    run_denoising_stage,
)
from ltx_pipelines.engine.guided import (
    GuidanceSettings,
    checked_stage_sigmas,
    guided_inputs,
    guided_prompt_call,
    stage_sigmas_or,
)
from ltx_pipelines.engine.model_versions import DEFAULT_MAX_BATCH_SIZE, ONE_STAGE_SPATIAL_MULTIPLE, PipelineDefaults
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions
from ltx_pipelines.engine.requests import GuidanceRequest
from ltx_pipelines.engine.source_latents import encode_audio_latent, encode_video_latent
from ltx_pipelines.io import frames_to_model_input, probe_video, read_audio, read_video
from ltx_pipelines.pipelines.guided import DEFAULT_GUIDANCE, GuidedPipeline

if TYPE_CHECKING:
    from typing_extensions import Unpack


# The reference's step count for a full checkpoint under guidance (its library default).
FULL_CHECKPOINT_STEPS = 40


@dataclass(frozen=True)
class RetakeSource:
    """The video to retake: its shape (frames, size, fps) and, for each modality, either its encoded
    latent or its media (pixels (1, 3, F, H, W) in [-1, 1]; a waveform (channels, N) at `sample_rate`).
    No audio at all: the audio is generated for the whole clip."""

    shape: VideoPixelShape
    pixels: torch.Tensor | None = None
    video_latent: torch.Tensor | None = None
    waveform: torch.Tensor | None = None
    sample_rate: int | None = None
    audio_latent: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if (self.pixels is None) == (self.video_latent is None):
            raise ValueError("a retake source needs exactly one of pixels and video_latent")
        if self.waveform is not None and self.audio_latent is not None:
            raise ValueError("a retake source takes a waveform or an audio latent, not both")
        if self.waveform is not None and not self.sample_rate:
            raise ValueError("a source waveform needs its sample_rate")
        check_source_shape(self.shape.frames, self.shape.height, self.shape.width)

    @property
    def has_audio(self) -> bool:
        return self.waveform is not None or self.audio_latent is not None

    @classmethod
    def from_file(cls, path: str | Path) -> RetakeSource:
        """Every frame of the file's video (at its own size and frame rate) and the audio that spans it."""
        info = probe_video(path)
        clip = read_video(path)
        frames, height, width = clip.frames.shape[:3]
        shape = VideoPixelShape(1, int(frames), int(height), int(width), info.fps)
        pixels = frames_to_model_input(clip.frames, int(height), int(width))
        waveform = rate = None
        if info.has_audio:
            audio = read_audio(path, max_duration=frames / info.fps)
            waveform, rate = audio.waveform, audio.sample_rate
        return cls(shape, pixels=pixels, waveform=waveform, sample_rate=rate)


def check_source_shape(frames: int, height: int, width: int) -> None:
    """Frames 8k+1, height and width multiples of 32; the error names the nearest valid values."""
    t, s = DEFAULT_SCALE_FACTORS.time, ONE_STAGE_SPATIAL_MULTIPLE
    problems = []
    if frames < 1 or (frames - 1) % t:
        below = max(1, (frames - 1) // t * t + 1)
        problems.append(f"{frames} frames (must be {t}k+1: use {below} or {below + t} frames)")
    for name, value in (("height", height), ("width", width)):
        if value < s or value % s:
            below = max(s, value // s * s)
            problems.append(f"{name} {value} (must be a multiple of {s}: use {below} or {below + s})")
    if problems:
        raise ValueError("the source video does not fit the model's grid: " + "; ".join(problems))


@dataclass(frozen=True)
class RetakeRegion:
    """What a retake regenerates: [start_time, end_time) seconds of the source, in its video, its audio or both
    (a modality left out keeps all of its source)."""

    start_time: float
    end_time: float
    regenerate_video: bool = True
    regenerate_audio: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start_time) and self.start_time >= 0):
            raise ValueError(f"start_time {self.start_time} must be >= 0 seconds")
        if not (math.isfinite(self.end_time) and self.end_time > self.start_time):
            raise ValueError(f"end_time {self.end_time} must be after start_time {self.start_time}")
        if not (self.regenerate_video or self.regenerate_audio):
            raise ValueError("nothing to retake: regenerate_video and regenerate_audio are both off")


class RetakePipeline(GuidedPipeline):
    """Regenerate [start_time, end_time) seconds of a source video from a prompt.

    `distilled=True` (default): a distilled checkpoint, its sigmas, no guidance, only the prompt is
    encoded. `distilled=False`: a full checkpoint, the LTX-2 scheduler (40 steps by default) and
    multi-modal guidance against the negative prompt (`guidance=GuidanceRequest(...)`). Call with a prompt and
    a `RetakeSource` (the output has its size, length and rate) or drive `latents_from_contexts` directly.
    """

    def __init__(
        self,
        checkpoint_path: str | Path,
        gemma_root: str | Path | None,
        *,
        distilled: bool = True,
        max_batch_size: int | None = DEFAULT_MAX_BATCH_SIZE,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`max_batch_size` (how many guidance passes share one transformer call, None: all) applies with
        `distilled=False`; `options`: see `PipelineOptions`."""
        super().__init__(checkpoint_path, gemma_root, max_batch_size=max_batch_size, **options)
        self.distilled = distilled

    def guidance_defaults(self) -> PipelineDefaults:
        """The model version's guidance, with the reference's step count for a full checkpoint."""
        return replace(super().guidance_defaults(), num_inference_steps=FULL_CHECKPOINT_STEPS)

    def guidance_settings(self, guidance: GuidanceRequest) -> GuidanceSettings:
        """Distilled: no guidance (a request that sets any is refused). Full: the guided pipeline's settings."""
        if not self.distilled:
            return super().guidance_settings(guidance)
        given = [name for name, value in guidance.parameters().items() if value is not None]
        if given:
            raise ValueError(f"the distilled retake runs without guidance: {given} not accepted")
        off = MultiModalGuiderParams()
        return GuidanceSettings(num_inference_steps=self.guidance_defaults().num_inference_steps, video=off, audio=off)

    def generate(  # type: ignore[override]
        self,
        prompt: str,
        *,
        source: RetakeSource,
        region: RetakeRegion,
        seed: int,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """The source with `region` regenerated; the same seed gives the same result."""
        self.guidance_settings(guidance)  # a bad value fails before Gemma runs
        if not self.distilled:
            return guided_prompt_call(
                self, prompt, seed=seed, images=(), enhance_prompt=enhance_prompt, guidance=guidance,
                source=source, region=region,
            )  # fmt: skip
        (contexts,), final_prompt = self.encode_prompts([prompt], seed=seed, images=(), enhance=enhance_prompt)
        final = self.latents_from_contexts(contexts, None, source=source, region=region, noise=SeededNoise(seed))
        return replace(final, prompt=final_prompt)

    def latents_from_contexts(  # type: ignore[override]
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None = None,
        *,
        source: RetakeSource,
        region: RetakeRegion,
        noise: NoiseSource,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
    ) -> FinalLatents:
        """The retake stage, to the final latents, from given contexts, the source and a noise source (the parity
        seam). Distilled: `negative_contexts` must be None and `guidance` empty."""
        if self.distilled and negative_contexts is not None:
            raise ValueError("the distilled retake runs without guidance: ['negative_contexts'] not accepted")
        settings = self.guidance_settings(guidance)
        given = checked_stage_sigmas(stage_sigmas, self.stage_names)
        inputs = guided_inputs(settings, contexts, negative_contexts, self.placement)
        if self.distilled:
            sigmas = stage_sigmas_or(given, "stage_1", distilled_sigmas)
        else:
            sigmas = stage_sigmas_or(given, "stage_1", lambda: self.default_stage_1_sigmas(settings, source.shape))
        video_latent, audio_latent = self.source_latents(source)
        mask = TemporalRegionMask(region.start_time, region.end_time)
        video_items: list[ConditioningItem] = [mask if region.regenerate_video else FrozenModality()]
        # A source without sound: the audio of the whole clip is generated.
        audio_items: list[ConditioningItem] = []
        if audio_latent is not None:
            audio_items = [mask if region.regenerate_audio else FrozenModality()]

        (loras,) = self.stage_loras()
        with self.transformer(loras) as transformer:
            denoiser: Denoiser
            if self.distilled:
                denoiser = SimpleDenoiser(X0Model(transformer), inputs.positive.video, inputs.positive.audio)
            else:
                denoiser = self.guided_stage_denoiser(transformer, inputs)
            result = run_denoising_stage(
                denoiser, source.shape, sigmas, noise, "stage_1", self.placement.device, self.placement.dtype,
                conditionings=video_items, audio_conditionings=audio_items, initial_video=video_latent,
                initial_audio=audio_latent, progress=self.progress,
            )  # fmt: skip
        latents = {"source_video_latent": video_latent, **result.latents}
        if audio_latent is not None:
            latents["source_audio_latent"] = audio_latent
        return finished_latents(self, source.shape, result.video_latent, result.audio_latent, noise, latents)

    def source_latents(self, source: RetakeSource) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The source's video latent and audio latent (None without audio), encoded where not given."""
        shape = source.shape
        video = source.video_latent
        if video is None:
            assert source.pixels is not None
            frames = VideoLatentShape.from_pixel_shape(shape).frames
            video = encode_video_latent(self.checkpoint_path, self.placement, source.pixels, latent_frames=frames)
        audio = source.audio_latent
        if audio is None and source.waveform is not None:
            assert source.sample_rate is not None
            frames = AudioLatentShape.from_video(shape).frames
            audio = encode_audio_latent(
                self.checkpoint_path, self.placement, source.waveform, source.sample_rate, latent_frames=frames
            )
        return video.to(self.placement.device), None if audio is None else audio.to(self.placement.device)


@dataclass(frozen=True)
class RetakeRequest:
    """The retake flags, checked: the source video and the region to regenerate in it."""

    video_path: Path
    region: RetakeRegion
