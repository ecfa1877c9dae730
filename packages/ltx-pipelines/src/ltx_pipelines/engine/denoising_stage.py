"""The building blocks pipelines are made of: conditioning, one denoising stage, upsampling (decoding is the
decode step's, `engine/generation.py`).

Each block is a plain function over already loaded models, so the pipelines decide what is resident
when, and tests can drive a block with stored inputs.

A stage's initial states (`start_stage`) are built, conditioned, then noised to the stage's first sigma. The
order of that work is part of the reproducibility contract: conditionings are applied before the noise
(they fix the token layout and so the noise layout), and the video draw (`<stage>.video`) comes before
the audio draw (`<stage>.audio`).

The stage steps run straight from the model files: each loads the model it needs, runs, and frees it. They
wrap the plain blocks above with the load/release policy every pipeline uses, so a
pipeline module reads as its sequence of stages and holds at most one large model at a time.

Which sampling loop a denoising stage runs: plain Euler (the default), or Euler ancestral - a
deterministic Euler step to `sigma_down` and fresh noise back up to the next sigma (rectified-flow form,
`ltx_core.components.EulerAncestralStep`).

The ancestral re-noise has its own stream: with a seeded run it is a second generator seeded
`seed + ANCESTRAL_NOISE_SEED_OFFSET` (the reference's rule: a generator seeded like the stage's initial
noise would repeat those very draws), drawn video then audio per step and named
`<stage>.ancestral.<step>.<video|audio>`, so a recorded run is replayed through the same names.

LTX-2.5 (`model_version` >= 2.5) samples the distilled pipeline's stage 1 this way (eta 1, s_noise 1);
every stage takes it as an option (`run_denoising_stage(sampler=...)`).

Where a pipeline's random draws come from: a seeded generator, or tensors replayed from a file.

Every draw is named (`stage_1.video`, `stage_1.audio`, `stage_2.video`, ..., `decoder.<i>`, and
the res2s sampler's `stage_<k>.res2s.<i>.<substep|step>.<video|audio>`) and made in a fixed order,
so a run can be reproduced exactly from its seed, or replayed from stored noise (the golden
fixtures) through the very same pipeline code. `NoiseSource` is the core protocol, so core
samplers take these sources too.

`FinalLatents` is what generating returns: a run's final latents and what decoding them takes, as one value.
Denoising is the expensive part of a run; decoding and writing come after it and can fail on their own
(out of memory, disk full, an encoder error). A `FinalLatents` holds everything the decode step
(`engine/generation.py`) needs - the latents, the checkpoint with the VAE and vocoder, the placement, the
tiling and the noise source positioned at the decoder's first draw - so the command line can save it
before decoding, and decoding it again gives the same frames.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from ltx_core.components import EulerAncestralStep, euler_ancestral_denoising_loop
from ltx_core.components.denoisers import Denoiser, GuidedDenoiser, X0Callable
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.noisers import NoiseSource, add_noise
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.conditioning import (
    ConditioningItem,
    FrozenModality,
    VideoConditionByKeyframeIndex,
    VideoConditionByLatentIndex,
    VideoGeneratedKeyframeSlots,
    apply_conditionings,
    read_generated_keyframes,
)
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.loader import ComponentSource
from ltx_core.loader.model_files import ModelSource
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.model.video_vae import VIDEO_ENCODER, VideoEncoder
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import DEFAULT_SCALE_FACTORS, LatentState, VideoPixelShape
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.model_versions import defaults_for_checkpoint
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
    stage: str = "stage"
    """The stage's name (the prefix of its draws and of `latents`)."""
    latents: dict[str, torch.Tensor] = field(init=False, repr=False, compare=False)
    """The latents as a Generation records them: `<stage>.video_latent`, `<stage>.audio_latent` (and
    `<stage>.video_generated_keyframes`); worked out with the result, so a runner collecting them asks nothing."""

    def __post_init__(self) -> None:
        pairs = (
            ("video_latent", self.video_latent),
            ("audio_latent", self.audio_latent),
            ("video_generated_keyframes", self.video_generated_keyframes),
        )
        named = {f"{self.stage}.{name}": latent for name, latent in pairs if latent is not None}
        object.__setattr__(self, "latents", named)


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
        stage=stage,
    )


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


def keyframe_slot_items(conditionings: Sequence[ConditioningItem]) -> list[VideoGeneratedKeyframeSlots]:
    """The stage's keyframe slots item (a list of at most one; a stage reads back one set of slots)."""
    items = [item for item in conditionings if isinstance(item, VideoGeneratedKeyframeSlots)]
    if len(items) > 1:
        raise ValueError(f"a stage takes one keyframe slots item, got {len(items)}")
    return items


@dataclass(frozen=True)
class StageStart:
    """Where a stage's initial states come from: its noise source and the stage name that prefixes the
    draw names, the sigma they are noised to, and the states' device and dtype."""

    noise: NoiseSource
    stage: str
    noise_scale: float
    device: torch.device
    dtype: torch.dtype

    def _initial(self, latent: torch.Tensor | None) -> torch.Tensor | None:
        return None if latent is None else latent.to(device=self.device, dtype=self.dtype)

    def _noised(self, state: LatentState, modality: str) -> LatentState:
        draw = self.noise(f"{self.stage}.{modality}", state.latent.shape, device=self.device, dtype=self.dtype)
        return add_noise(state, draw, self.noise_scale)

    def video(
        self, tools: VideoLatentTools, conditionings: Sequence[ConditioningItem], initial: torch.Tensor | None
    ) -> tuple[LatentState, int]:
        """The noised video state and the token index where a keyframe slots item appended its tokens
        (0 without one)."""
        state = tools.create_initial_state(device=self.device, dtype=self.dtype, initial_latent=self._initial(initial))
        slot_start = 0
        for item in conditionings:
            if isinstance(item, VideoGeneratedKeyframeSlots):
                slot_start = state.latent.shape[1]  # its tokens are appended here
            state = item.apply_to(state, tools)
        return self._noised(state, "video"), slot_start

    def audio(
        self, tools: AudioLatentTools, conditionings: Sequence[ConditioningItem], initial: torch.Tensor | None
    ) -> LatentState:
        state = tools.create_initial_state(device=self.device, dtype=self.dtype, initial_latent=self._initial(initial))
        state = apply_conditionings(state, list(conditionings), tools)
        return self._noised(state, "audio")


@dataclass(frozen=True)
class EncodedImages:
    """Image conditionings per requested stage size, and (when asked for) the VAE latent statistics
    the x2 upsampler needs between the stages."""

    per_stage: tuple[list[ConditioningItem], ...]
    latent_statistics: nn.Module | None = None


def encode_conditioning_images(
    images: Sequence[ImageCondition],
    checkpoint: ModelSource,
    placement: Placement,
    shapes: Sequence[VideoPixelShape],
    *,
    keep_latent_statistics: bool = False,
    all_as_keyframes: bool = False,
    also_encode: Callable[[nn.Module], Sequence[Sequence[ConditioningItem]]] | None = None,
) -> EncodedImages:
    """VAE-encode the conditioning images once per stage size with one encoder load. Without images
    and without a need for the statistics, the encoder is not loaded at all. `all_as_keyframes`: see
    `image_conditionings`. `also_encode(encoder)` gives further items per stage (e.g. IC-LoRA reference
    videos), appended after the images' with the same encoder load."""
    if not images and not keep_latent_statistics and also_encode is None:
        return EncodedImages(per_stage=tuple([] for _ in shapes))
    device, dtype = placement.device, placement.dtype
    if images:  # only images are re-compressed: their CRF is the model version's where they give none
        crf = defaults_for_checkpoint(checkpoint).image_crf
        images = [image.with_default_crf(crf) for image in images]
    with loaded(VIDEO_ENCODER, checkpoint, placement) as encoder:
        per_stage = tuple(
            image_conditionings(images, encoder, shape, device, dtype, all_as_keyframes=all_as_keyframes)
            for shape in shapes
        )
        if also_encode is not None:
            extra = also_encode(encoder)
            if len(extra) != len(shapes):
                raise ValueError(f"also_encode gave items for {len(extra)} stages, expected {len(shapes)}")
            per_stage = tuple([*items, *more] for items, more in zip(per_stage, extra))
        # A copy: the encoder's own weights go back to the meta device when it is released.
        statistics = copy.deepcopy(encoder.per_channel_statistics) if keep_latent_statistics else None
    return EncodedImages(per_stage=per_stage, latent_statistics=statistics)


def upsample_between_stages(
    video_latent: torch.Tensor,
    upsampler_path: str | Path | ComponentSource,
    latent_statistics: nn.Module,
    placement: Placement,
) -> torch.Tensor:
    """The stage-1 video latent upsampled by the latent upsampler (a file, or its diffusers folder), through the
    VAE statistics."""
    with loaded(LATENT_UPSAMPLER, upsampler_path, placement) as upsampler, torch.no_grad():
        return upsample_video_latent(video_latent, upsampler, latent_statistics)


class RunSettings(Protocol):
    """What decoding a run's latents takes from the pipeline that ran it (a `Pipeline` is one)."""

    @property
    def checkpoint_path(self) -> ModelSource: ...

    @property
    def placement(self) -> Placement: ...

    @property
    def tiling(self) -> TilingConfig | None: ...


def finished_latents(
    pipeline: RunSettings,
    shape: VideoPixelShape,
    video_latent: torch.Tensor | None,
    audio_latent: torch.Tensor | None,
    noise: NoiseSource,
    latents: dict[str, torch.Tensor],
) -> FinalLatents:
    """What a finished run of `pipeline` returns: its final latents and what decoding them takes (nothing is
    decoded here: that is the decode step, `engine/generation.py`): the pipeline's model files and placement,
    its tiling (None: the automatic layout for the output size, `decode_tiling_for`), and the noise forked at
    the decoder's first draw."""
    return FinalLatents(
        video=video_latent,
        audio=audio_latent,
        shape=shape,
        checkpoint=pipeline.checkpoint_path,
        placement=pipeline.placement,
        tiling=decode_tiling_for(shape, pipeline.tiling),
        noise=fork_noise(noise),
        stage_latents=dict(latents),
    )


def decode_tiling_for(shape: VideoPixelShape, tiling: TilingConfig | None) -> TilingConfig:
    """`tiling` itself, or (None) the automatic layout: 768-pixel tiles on the output's long side, the
    short side split as often, 80-frame temporal tiles (the reference's choice for these VAEs)."""
    return tiling if tiling is not None else TilingConfig.for_output(shape.height, shape.width, DEFAULT_SCALE_FACTORS)


def contexts_on(contexts: TextContexts, placement: Placement) -> TextContexts:
    """Text contexts moved to where (and in the dtype) the transformer runs."""
    device, dtype = placement.device, placement.dtype
    return TextContexts(
        video=contexts.video.to(device=device, dtype=dtype),
        audio=None if contexts.audio is None else contexts.audio.to(device=device, dtype=dtype),
        mask=contexts.mask.to(device),
    )


ANCESTRAL_NOISE_SEED_OFFSET = 10000


@dataclass(frozen=True)
class AncestralSampler:
    """Euler ancestral with `eta` (0: plain Euler, 1: fully ancestral) and `s_noise` (re-noise scale); its
    draws come from the run's noise source offset by `noise_seed_offset`."""

    eta: float = 1.0
    s_noise: float = 1.0
    noise_seed_offset: int = ANCESTRAL_NOISE_SEED_OFFSET

    def __post_init__(self) -> None:
        if not 0.0 <= self.eta <= 1.0:
            raise ValueError(f"ancestral eta must be in [0, 1], got {self.eta}")
        if self.s_noise < 0:
            raise ValueError(f"ancestral s_noise must be >= 0, got {self.s_noise}")

    def loop(self, noise: NoiseSource, stage: str):  # -> SamplingLoop
        """The stage's sampling loop, drawing from its own stream of `noise` (one per stage call)."""
        return partial(
            euler_ancestral_denoising_loop,
            step=EulerAncestralStep(eta=self.eta, s_noise=self.s_noise),
            noise=offset_stream(noise, self.noise_seed_offset),
            noise_name_prefix=f"{stage}.",
        )


@dataclass
class SeededNoise:
    """Draws from one CPU `torch.Generator`, so a seed gives the same noise on every device."""

    seed: int
    drawn: list[str] = field(default_factory=list)
    _generator: torch.Generator | None = field(default=None, repr=False)

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if self._generator is None:
            self._generator = torch.Generator(device="cpu").manual_seed(self.seed)
        self.drawn.append(name)
        noise = torch.randn(tuple(shape), generator=self._generator, dtype=torch.float32)
        return noise.to(device=device, dtype=dtype)

    def generator_state(self) -> torch.Tensor | None:
        """Where the draws stand (a copy of the generator's state), or None before the first draw."""
        return None if self._generator is None else self._generator.get_state().clone()

    @classmethod
    def resumed(cls, seed: int, state: torch.Tensor | None) -> SeededNoise:
        """A source whose next draw is the one that followed `state` (None: the seed's first draw)."""
        source = cls(seed)
        if state is not None:
            source._generator = torch.Generator(device="cpu")
            source._generator.set_state(state.clone())
        return source

    def fork(self) -> SeededNoise:
        """An independent copy at the same point: its draws are the ones this source would make next."""
        return SeededNoise.resumed(self.seed, self.generator_state())


def offset_stream(noise: NoiseSource, offset: int) -> NoiseSource:
    """A second, independent stream of a run's noise: a seeded source gives a fresh generator seeded
    `seed + offset` (e.g. the ancestral sampler's re-noise); a replay serves those draws by their names
    from the same stored tensors, so it is returned as it is."""
    if isinstance(noise, SeededNoise):
        return SeededNoise(noise.seed + offset)
    return noise


def fork_noise(noise: NoiseSource) -> NoiseSource:
    """A copy of `noise` at its current point (sources that keep no position are returned as they are),
    so the same draws can be made again, e.g. to decode a video twice."""
    fork = getattr(noise, "fork", None)
    return fork() if callable(fork) else noise


@dataclass(frozen=True)
class ReplayedNoise:
    """Returns stored tensors by name (e.g. `t2v.noise.stage_1.video` with prefix `t2v.noise.`).

    `drawn` records every name served, in order, so a replay can check that each stored draw was
    consumed exactly once (`unused()`, `repeated()`).
    """

    tensors: Mapping[str, torch.Tensor]
    prefix: str = ""
    drawn: list[str] = field(default_factory=list, compare=False)

    @property
    def stored(self) -> list[str]:
        """Names (without the prefix) of the stored draws, in storage order."""
        return [k[len(self.prefix) :] for k in self.tensors if k.startswith(self.prefix)]

    def unused(self) -> list[str]:
        return [name for name in self.stored if name not in self.drawn]

    def repeated(self) -> list[str]:
        return sorted({name for name in self.drawn if self.drawn.count(name) > 1})

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        key = self.prefix + name
        if key not in self.tensors:
            raise KeyError(f"no stored noise named {key!r}")
        noise = self.tensors[key]
        if tuple(noise.shape) != tuple(shape):
            raise ValueError(f"stored noise {key!r} has shape {tuple(noise.shape)}, the pipeline needs {tuple(shape)}")
        self.drawn.append(name)
        return noise.to(device=device, dtype=dtype)


@dataclass(frozen=True)
class Waveform:
    """A decoded stereo waveform: (2, N) float32 samples in [-1, 1] at `sample_rate`."""

    samples: torch.Tensor
    sample_rate: int


@dataclass(frozen=True)
class FinalLatents:
    """A run's last video and audio latents, the latents of each stage, and what decoding them takes."""

    video: torch.Tensor | None
    """The final video latent; None for an audio-only run."""
    audio: torch.Tensor | None
    """The final audio latent; None for a run without audio."""
    shape: VideoPixelShape
    """The output size, length and frame rate (audio-only runs: a placeholder size with the duration)."""
    checkpoint: ModelSource
    """The model files holding the video VAE decoder, the audio decoder and the vocoder (one file, a folder or
    a set of component files)."""
    placement: Placement
    tiling: TilingConfig | None
    noise: NoiseSource
    """Positioned at the decoder's first draw; every decode draws from a fresh copy."""
    stage_latents: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """The latents each stage produced, by name (`stage_1.video_latent`, ...), for inspection and tests."""
    prompt: str = ""
    """The prompt as encoded (rewritten by Gemma with prompt enhancement)."""
    shipped_audio: Waveform | None = None
    """A waveform shipped as the output's sound instead of decoding `audio` (audio-to-video ships its input
    track, DFR its stage-1 audio cut to the video); a saved latents file keeps it, so decoding that file
    writes the same sound."""
