"""The building blocks pipelines are made of: conditioning, one denoising stage, upsampling, decoding.

Each block is a plain function over already loaded models, so the pipelines decide what is resident
when, and tests can drive a block with stored inputs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ltx_core.components.denoisers import Denoiser, GuidedDenoiser, X0Callable
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.conditioning import (
    ConditioningItem,
    FrozenModality,
    VideoConditionByKeyframeIndex,
    VideoConditionByLatentIndex,
    read_generated_keyframes,
)
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.model.audio_vae import AudioDecoder, decode_audio
from ltx_core.model.video_vae import DiffusionVideoDecoder, VideoDecoder, VideoEncoder
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.no_grad_iteration import no_grad_items
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import LatentState, VideoPixelShape
from ltx_pipelines.engine.noise_sources import NoiseSource
from ltx_pipelines.engine.stage_samplers import AncestralSampler
from ltx_pipelines.engine.stage_start import StageStart, keyframe_slot_items
from ltx_pipelines.io import load_image_conditioning

logger = logging.getLogger(__name__)

# A sampling loop: (denoiser, sigmas, video state, audio state) -> final states.
SamplingLoop = Callable[..., tuple[LatentState | None, LatentState | None]]


@dataclass(frozen=True)
class ImageCondition:
    """One conditioning image: a file (resized per stage) or pixels already prepared per stage size.

    `pixels` maps (height, width) to a (1, 3, 1, H, W) tensor in [-1, 1]; it lets callers that
    preprocess images themselves (and the parity tests) skip the file path.
    """

    frame_idx: int
    strength: float
    path: Path | None = None
    crf: int | None = None
    """H.264 CRF the image is re-compressed at; None: the model version's (see `with_default_crf`)."""
    pixels: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)

    def load(self, height: int, width: int) -> torch.Tensor:
        if (height, width) in self.pixels:
            return self.pixels[(height, width)]
        if self.path is None:
            raise ValueError(
                f"image condition at frame {self.frame_idx} has no file and no pixels for {height}x{width}"
            )
        if self.crf is None:
            raise ValueError(f"image condition at frame {self.frame_idx} has no CRF; resolve it with with_default_crf")
        return load_image_conditioning(self.path, height, width, crf=self.crf)

    def with_default_crf(self, crf: int) -> ImageCondition:
        """This condition with `crf` where it has none."""
        return self if self.crf is not None else replace(self, crf=crf)


def image_conditionings(
    images: Sequence[ImageCondition],
    encoder: VideoEncoder,
    shape: VideoPixelShape,
    device: torch.device,
    dtype: torch.dtype,
    *,
    all_as_keyframes: bool = False,
) -> list[ConditioningItem]:
    """VAE-encode each image at the stage size: frame 0 replaces the first latent frame's tokens,
    any other frame is appended as a keyframe at that pixel-frame index. With `all_as_keyframes`
    (keyframe interpolation) frame 0 is appended as a guiding keyframe too."""
    items: list[ConditioningItem] = []
    for image in images:
        pixels = image.load(shape.height, shape.width).to(device=device, dtype=dtype)
        with torch.no_grad():
            latent = encoder(pixels)
        if image.frame_idx == 0 and not all_as_keyframes:
            items.append(VideoConditionByLatentIndex(latent, image.strength, 0))
        else:
            items.append(VideoConditionByKeyframeIndex(latent, image.frame_idx, image.strength))
    return items


@dataclass(frozen=True, eq=False)
class StageConditions:
    """What a caller adds to a denoising stage beyond images: conditioning items per modality, the
    initial (source) latents they refer to, and which modalities take part at all.

    Callers that encode their own media (the trainer's validation samples: video/audio extension,
    inpainting, outpainting, IC references, one modality frozen) hand these to a pipeline's stage.
    A frozen modality is present with a `FrozenModality` item (denoise mask 0): it conditions the other
    one and comes out unchanged. `with_video` / `with_audio` False leave a modality out entirely.
    """

    video: tuple[ConditioningItem, ...] = ()
    audio: tuple[ConditioningItem, ...] = ()
    initial_video: torch.Tensor | None = None
    """Video latent (1, 128, F, H, W) the state starts from (None: zeros); e.g. the frozen video."""
    initial_audio: torch.Tensor | None = None
    """Audio latent (1, 8, T, 16) the state starts from (None: zeros); e.g. the frozen audio."""
    with_video: bool = True
    with_audio: bool = True

    def __post_init__(self) -> None:
        if not (self.with_video or self.with_audio):
            raise ValueError("stage conditions leave out both video and audio; at least one must take part")
        for name, present, items, initial in (
            ("video", self.with_video, self.video, self.initial_video),
            ("audio", self.with_audio, self.audio, self.initial_audio),
        ):
            if not present and (items or initial is not None):
                raise ValueError(
                    f"stage conditions give {name} items or an initial {name} latent with with_{name}=False"
                )

    @property
    def video_frozen(self) -> bool:
        return any(isinstance(item, FrozenModality) for item in self.video)

    @property
    def audio_frozen(self) -> bool:
        return any(isinstance(item, FrozenModality) for item in self.audio)

    def stage_arguments(self) -> dict[str, object]:
        """The keywords of `run_denoising_stage` these conditions set (images' items are passed apart)."""
        return {
            "audio_conditionings": self.audio,
            "initial_video": self.initial_video,
            "initial_audio": self.initial_audio,
            "with_video": self.with_video,
            "with_audio": self.with_audio,
        }


@dataclass(frozen=True)
class StageResult:
    video_latent: torch.Tensor | None
    audio_latent: torch.Tensor | None
    video_generated_keyframes: torch.Tensor | None = None
    """The generated keyframe slots' latent (B, C, K, h, w), when the stage had slots; not part of
    `video_latent` (the slots are dropped from the state, as every appended token)."""

    def named(self, stage: str) -> dict[str, torch.Tensor]:
        """The latents as a Generation records them: `<stage>.video_latent`, `<stage>.audio_latent` (and
        `<stage>.video_generated_keyframes`)."""
        pairs = (
            ("video_latent", self.video_latent),
            ("audio_latent", self.audio_latent),
            ("video_generated_keyframes", self.video_generated_keyframes),
        )
        return {f"{stage}.{name}": latent for name, latent in pairs if latent is not None}


def run_denoising_stage(
    denoiser: Denoiser,
    shape: VideoPixelShape,
    sigmas: torch.Tensor,
    noise: NoiseSource,
    stage: str,
    device: torch.device,
    dtype: torch.dtype,
    *,
    conditionings: Sequence[ConditioningItem] = (),
    audio_conditionings: Sequence[ConditioningItem] = (),
    initial_video: torch.Tensor | None = None,
    initial_audio: torch.Tensor | None = None,
    with_video: bool = True,
    with_audio: bool = True,
    loop: SamplingLoop | None = None,
    progress: bool = True,
    sampler: AncestralSampler | None = None,
) -> StageResult:
    """Build the initial states (noised to `sigmas[0]`), apply conditionings (`conditionings` to the
    video, `audio_conditionings` to the audio), run the loop (`loop`, or the `sampler`'s, default Euler).

    Noise draws are named `<stage>.video` then `<stage>.audio`, in token layout; that order is part
    of the reproducibility contract (`SeededNoise`) and of the golden replay (`ReplayedNoise`).
    `conditionings` edit the video state, `audio_conditionings` the audio state (e.g. a frozen audio
    track or a retake region); both are applied before the noise, in the given order, which fixes the token
    (and so the noise) layout. At most one `VideoGeneratedKeyframeSlots`: its slots are read back into
    `StageResult.video_generated_keyframes`. Placed last, it leaves the target's noise unchanged at batch 1.
    """
    if loop is not None and sampler is not None:
        raise ValueError("run_denoising_stage takes a loop or a sampler, not both")
    if sampler is not None:
        # Its draws (`<stage>.ancestral.<i>.<modality>`) come after the stage's initial noise.
        loop = sampler.loop(noise, stage)
    loop = loop or euler_denoising_loop
    sigmas = sigmas.to(device=device, dtype=torch.float32)
    slot_items = keyframe_slot_items(conditionings)
    start = StageStart(noise, stage, noise_scale=float(sigmas[0]), device=device, dtype=dtype)
    video_tools = VideoLatentTools.from_pixel_shape(shape) if with_video else None
    audio_tools = AudioLatentTools.from_video(shape) if with_audio else None
    video, slot_start = (None, 0) if video_tools is None else start.video(video_tools, conditionings, initial_video)
    audio = None if audio_tools is None else start.audio(audio_tools, audio_conditionings, initial_audio)
    with torch.no_grad():
        video, audio = loop(denoiser, sigmas, video, audio, progress=progress)
    keyframes = None
    if slot_items and video_tools is not None and video is not None:
        count = len(slot_items[0].positions)
        keyframes = read_generated_keyframes(video, video_tools, count, first_token=slot_start)
    return StageResult(
        video_latent=video_tools.state_to_latent(video) if video_tools is not None else None,
        audio_latent=audio_tools.state_to_latent(audio) if audio_tools is not None else None,
        video_generated_keyframes=keyframes,
    )


AnyVideoDecoder = VideoDecoder | DiffusionVideoDecoder


def decoder_noise(
    decoder: VideoDecoder, latent: torch.Tensor, tiling: TilingConfig | None, noise: NoiseSource
) -> list[torch.Tensor] | None:
    """One noise per decoded tile for a timestep-conditioned decoder (drawn last, named decoder.<i>)."""
    if not decoder.timestep_conditioning:
        return None
    draws = []
    for i, tile in enumerate(decoder.tile_layout(latent.shape, tiling)):
        tile_shape = latent[(slice(None), slice(None), *tile.source)].shape
        draws.append(noise(f"decoder.{i}", tile_shape, device=latent.device, dtype=latent.dtype))
    return draws


def decode_video_frames(
    decoder: AnyVideoDecoder, latent: torch.Tensor, tiling: TilingConfig | None, noise: NoiseSource
) -> Iterator[torch.Tensor]:
    """Chunks of (f, H, W, 3) float frames in [0, 1], decoded tile band by tile band.

    The LTX-2.5 diffusion decoder draws its canvas noise from `noise` itself (draw `decoder.0`, after
    every stage's draws); with no `tiling` its tiles are fitted to the device's free memory."""
    if isinstance(decoder, DiffusionVideoDecoder):
        if tiling is None:
            try:
                tiling = decoder.recommended_tiling(latent.shape, latent.device)
            except ValueError as e:  # the device does not report its free memory: decode untiled
                logger.info("diffusion VAE decode untiled: %s", e)
        yield from no_grad_items(decoder.decode_video(latent, tiling, noise=noise))
        return
    tile_noise = decoder_noise(decoder, latent, tiling, noise)
    yield from no_grad_items(decoder.decode_video(latent, tiling, noise=tile_noise))


def decode_audio_waveform(decoder: AudioDecoder, vocoder: torch.nn.Module, latent: torch.Tensor) -> torch.Tensor:
    """(2, N) float32 waveform at the vocoder's output rate, for a batch-1 audio latent."""
    with torch.no_grad():
        waveform = decode_audio(latent.to(next(decoder.parameters()).dtype), decoder, vocoder)
    return waveform[0].float()


def guided_denoiser(
    model: X0Callable,
    contexts: TextContexts,
    negative_contexts: TextContexts | None,
    video_guidance: MultiModalGuiderParams,
    audio_guidance: MultiModalGuiderParams,
    *,
    max_batch_size: int | None = None,
) -> GuidedDenoiser:
    """The multi-modal guided denoiser of a full-checkpoint stage: positive contexts, the negative
    prompt's contexts for CFG (None when neither modality uses CFG), one params set per modality.

    Contexts are used as given (no mask): the connectors already replaced padding by registers.
    """
    needs_negative = [name for name, p in (("video", video_guidance), ("audio", audio_guidance)) if p.needs_uncond_text]
    if negative_contexts is None and needs_negative:
        raise ValueError(
            f"{' and '.join(needs_negative)} CFG (cfg_scale != 1) needs the negative prompt's contexts; "
            "got negative_contexts=None"
        )
    return GuidedDenoiser(
        model,
        contexts.video,
        contexts.audio,
        negative_video_context=None if negative_contexts is None else negative_contexts.video,
        negative_audio_context=None if negative_contexts is None else negative_contexts.audio,
        video_guidance=video_guidance,
        audio_guidance=audio_guidance,
        max_batch_size=max_batch_size,
    )
