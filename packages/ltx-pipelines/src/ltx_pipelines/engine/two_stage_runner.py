"""The guided two-stage flow the full-checkpoint pipelines chain: encode the conditioning images at both
sizes, denoise stage 1 at half resolution, upsample the video latent x2, refine it at full resolution.

Stage 1's denoiser is the caller's (guided against the negative prompt, or with a frozen audio stream);
stage 2 refines without guidance over the pipeline's refinement transformer (over several devices,
possibly one tile per rank). Decoding, and which audio is shipped, stay with the pipeline.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltx_core.components.denoisers import Denoiser, SimpleDenoiser
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.components.schedulers import stage_2_distilled_sigmas
from ltx_core.conditioning import ConditioningItem, FrozenModality
from ltx_core.loader import LoraSpec, ModelFiles, StateDictCache
from ltx_core.loader.component_source import ComponentSource
from ltx_core.model.transformer import X0Model
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.model.video_vae import VIDEO_LATENT_STATISTICS
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import (
    AncestralSampler,
    EncodedImages,
    FinalLatents,
    ImageCondition,
    NoiseSource,
    SamplingLoop,
    StageResult,
    encode_conditioning_images,
    finished_latents,
    run_denoising_stage,
)
from ltx_pipelines.engine.guided import GuidedInputs, stage_guided_denoiser
from ltx_pipelines.engine.model_loading import loaded_models
from ltx_pipelines.engine.prompt_pipeline import Pipeline, PromptPipeline
from ltx_pipelines.engine.requests import GeneratedKeyframes, generated_keyframe_slots


@dataclass(frozen=True)
class StagePlan:
    """How one stage denoises: the LoRAs fused into its transformer, its sigmas and its sampling loop (or an
    ancestral `sampler`, which draws its own stream and replaces the loop)."""

    loras: tuple[LoraSpec, ...]
    sigmas: torch.Tensor
    loop: SamplingLoop = euler_denoising_loop
    sampler: AncestralSampler | None = None

    def sampling(self) -> dict[str, Any]:
        """The sampling keywords of `run_denoising_stage` (it takes a loop or a sampler, not both)."""
        return {"loop": None, "sampler": self.sampler} if self.sampler is not None else {"loop": self.loop}


@dataclass(frozen=True)
class StageItems:
    """Conditioning items a pipeline adds to one stage, per modality (after the runner's own)."""

    video: tuple[ConditioningItem, ...] = ()
    audio: tuple[ConditioningItem, ...] = ()


class ConditioningHook:
    """What a pipeline adds to the two stages of `run_two_stages` without rewriting the flow: items encoded with
    the VAE encoder the images use (IC-LoRA reference videos), items per stage (a reference audio, generated
    keyframe slots), stage-1 latents upsampled beside the video (DFR's slots). Each default adds nothing."""

    encodes: bool = False
    """Whether `encode` needs the VAE encoder (it is loaded once, with the images')."""

    def encode(self, encoder: nn.Module, half: VideoPixelShape, full: VideoPixelShape) -> list[list[ConditioningItem]]:
        """Video items encoded with `encoder`, for [stage 1 (at `half`), stage 2 (at `full`)]."""
        return [[], []]

    def stage_1(self) -> StageItems:
        """Items stage 1 takes after the images and the encoded items (generated keyframe slots come last)."""
        return StageItems()

    def upsampled_too(self, first: StageResult) -> dict[str, torch.Tensor]:
        """Stage-1 latents (by the name they are kept under) upsampled with the video, in one upsampler load."""
        return {}

    def stage_2(self, first: StageResult, upsampled: Mapping[str, torch.Tensor]) -> StageItems:
        """Items stage 2 takes after its encoded items, given stage 1's result and the `upsampled_too` latents."""
        return StageItems()


NO_HOOK = ConditioningHook()


@dataclass(frozen=True)
class TwoStageResult:
    stage_1: StageResult
    stage_2: StageResult | None
    """None when the run stopped after stage 1 (`stage_2` plan None)."""
    latents: dict[str, torch.Tensor]
    """Every intermediate latent by name (`stage_1.*`, `upsampled_*`, `stage_2.*`)."""
    latent_statistics: nn.Module | None = None
    """The VAE latent statistics the upsampling went through (a pipeline's later upsampling reuses them)."""

    @property
    def refined(self) -> StageResult:
        """Stage 2's result (a run with both stages)."""
        if self.stage_2 is None:
            raise ValueError("this run stopped after stage 1: it has no stage-2 result")
        return self.stage_2


def half_size(shape: VideoPixelShape) -> VideoPixelShape:
    """The stage-1 shape of a two-stage run: half the output's height and width."""
    return VideoPixelShape(1, shape.frames, shape.height // 2, shape.width // 2, shape.fps)


def simple_denoiser(contexts: TextContexts) -> Callable[[nn.Module], Denoiser]:
    """The unguided denoiser over `contexts` (placed for the transformer), for a stage's transformer."""
    return lambda model: SimpleDenoiser(X0Model(model), contexts.video, contexts.audio)


def run_two_stages(
    pipeline: Pipeline,
    spatial_upsampler: Path,
    shape: VideoPixelShape,
    noise: NoiseSource,
    *,
    stage_1: StagePlan,
    stage_2: StagePlan | None,
    refine_contexts: TextContexts,
    stage_1_denoiser: Callable[[nn.Module], Denoiser] | None = None,
    images: Sequence[ImageCondition] = (),
    images_as_keyframes: bool = False,
    frozen_audio: torch.Tensor | None = None,
    generated_keyframes: GeneratedKeyframes = 0,
    hook: ConditioningHook = NO_HOOK,
    share_transformer: bool = False,
    stage_2_denoiser: Callable[[nn.Module], Denoiser] | None = None,
) -> TwoStageResult:
    """Both stages of a `shape` (full size) run (`stage_2` None: stage 1 only, nothing upsampled).

    `stage_1_denoiser(transformer)` makes stage 1's denoiser (None: a `SimpleDenoiser` over `refine_contexts`,
    placed for the transformer); stage 2's is `stage_2_denoiser(transformer)`, by default a `SimpleDenoiser` over
    `refine_contexts` and the pipeline's refinement model (over several devices possibly one tile per rank).
    `share_transformer`: both stages fuse the same LoRAs and one transformer build serves both (kept across the
    upsampling). `images_as_keyframes`: every image is appended as guiding keyframe tokens (see
    `image_conditionings`). `frozen_audio`: an audio latent that is the initial audio of both stages and never
    changes (never noised, sigma 0); None: stage 1 generates the audio and stage 2 re-noises and refines it.
    `generated_keyframes`: keyframe slots appended to stage 1 only (after every other video item; see
    `engine.generated_keyframes`), kept as `stage_1.video_generated_keyframes`. `hook`: the pipeline's own items
    per stage (`ConditioningHook`)."""
    _check_shared(share_transformer, stage_1, stage_2)
    # Checked before anything loads (the keyframe embedding, the positions in the clip).
    slots = generated_keyframe_slots(pipeline.checkpoint_path, generated_keyframes, shape.frames)
    encoded = _encode(pipeline, shape, images, images_as_keyframes, hook)
    audio_items: tuple[ConditioningItem, ...] = () if frozen_audio is None else (FrozenModality(),)
    own = hook.stage_1()
    stage_1_items = StageItems((*encoded.per_stage[0], *own.video, *slots), (*audio_items, *own.audio))
    latents: dict[str, torch.Tensor] = {}
    with _stage_transformers(pipeline, stage_1, stage_2, share_transformer) as transformer_for:
        with transformer_for(stage_1) as transformer:
            denoiser = (stage_1_denoiser or simple_denoiser(refine_contexts))(transformer)
            first = _run_stage(pipeline, denoiser, half_size(shape), stage_1, noise, "stage_1", stage_1_items,
                               initial_audio=frozen_audio)  # fmt: skip
        latents.update(first.latents)
        if stage_2 is None:
            return TwoStageResult(first, None, latents)
        upsampler = standalone_source(pipeline.checkpoint_path, spatial_upsampler)
        upsampled, statistics = _upsample(first, hook, upsampler, pipeline)
        latents.update(upsampled)
        extra = hook.stage_2(first, upsampled)
        stage_2_items = StageItems((*encoded.per_stage[1], *extra.video), (*audio_items, *extra.audio))
        with transformer_for(stage_2) as transformer:
            refiner = (stage_2_denoiser or _refinement_denoiser(pipeline, shape, refine_contexts))(transformer)
            second = _run_stage(
                pipeline, refiner, shape, stage_2, noise, "stage_2", stage_2_items,
                initial_video=upsampled[UPSAMPLED_VIDEO],
                initial_audio=first.audio_latent if frozen_audio is None else frozen_audio,
            )  # fmt: skip
    latents.update(second.latents)
    return TwoStageResult(first, second, latents, statistics)


UPSAMPLED_VIDEO = "upsampled_video_latent"


def _check_shared(share: bool, stage_1: StagePlan, stage_2: StagePlan | None) -> None:
    if share and stage_2 is not None and tuple(stage_1.loras) != tuple(stage_2.loras):
        raise ValueError(
            f"share_transformer: stage 1 fuses {[str(lora.path) for lora in stage_1.loras]} and stage 2 "
            f"{[str(lora.path) for lora in stage_2.loras]}; a shared transformer needs the same LoRAs in both"
        )


def _encode(
    pipeline: Pipeline,
    shape: VideoPixelShape,
    images: Sequence[ImageCondition],
    images_as_keyframes: bool,
    hook: ConditioningHook,
) -> EncodedImages:
    """The images' (and the hook's encoded) items per stage, with one encoder load; none without either (the
    latent statistics come with the upsampler)."""
    half = half_size(shape)
    if not images and not hook.encodes:
        return EncodedImages(per_stage=([], []))
    return encode_conditioning_images(
        images,
        pipeline.checkpoint_path,
        pipeline.placement,
        [half, shape],
        all_as_keyframes=images_as_keyframes,
        also_encode=(lambda encoder: hook.encode(encoder, half, shape)) if hook.encodes else None,
    )


@contextmanager
def _stage_transformers(
    pipeline: Pipeline, stage_1: StagePlan, stage_2: StagePlan | None, share: bool
) -> Iterator[Callable[[StagePlan], AbstractContextManager[nn.Module]]]:
    """A factory of each stage's transformer: one shared build (`share`), or one build per stage."""
    if share:
        with pipeline.transformer(stage_1.loras) as shared:
            yield lambda plan: nullcontext(shared)
        return
    # On the CPU both transformer builds share one cache: the module weights are the cached tensors,
    # so the file is read once at no extra memory, and each build fuses its LoRAs into new tensors.
    # On an accelerator the cache would pin a whole host copy of the transformer (~44 GB for the 22B
    # in bf16) across stage 1, so stage 2 reads the file again (usually from the OS page cache).
    cache = StateDictCache() if pipeline.placement.device.type == "cpu" and stage_2 is not None else None

    @contextmanager
    def build(plan: StagePlan) -> Iterator[nn.Module]:
        with pipeline.transformer(plan.loras, cache) as model:
            if cache is not None and plan is stage_2:
                cache.clear()  # the stage-2 model holds every weight it needs
            yield model

    yield build


def _run_stage(
    pipeline: Pipeline,
    denoiser: Denoiser,
    shape: VideoPixelShape,
    plan: StagePlan,
    noise: NoiseSource,
    name: str,
    items: StageItems,
    *,
    initial_video: torch.Tensor | None = None,
    initial_audio: torch.Tensor | None = None,
) -> StageResult:
    placement = pipeline.placement
    return run_denoising_stage(
        denoiser, shape, plan.sigmas, noise, name, placement.device, placement.dtype,
        conditionings=items.video, audio_conditionings=items.audio, initial_video=initial_video,
        initial_audio=initial_audio, progress=pipeline.progress, **plan.sampling(),
    )  # fmt: skip


def _upsample(
    first: StageResult,
    hook: ConditioningHook,
    upsampler: Path | ComponentSource,
    pipeline: Pipeline,
) -> tuple[dict[str, torch.Tensor], nn.Module]:
    """The hook's `upsampled_too` latents, then the stage-1 video (`upsampled_video_latent`), upsampled through
    the VAE latent statistics, which are loaded with the upsampler (a copy is returned for later upsamplings)."""
    assert first.video_latent is not None
    named = {**hook.upsampled_too(first), UPSAMPLED_VIDEO: first.video_latent}
    models = ((LATENT_UPSAMPLER, upsampler), (VIDEO_LATENT_STATISTICS, pipeline.checkpoint_path))
    with loaded_models(pipeline.placement, *models) as (model, statistics), torch.no_grad():
        upsampled = {name: upsample_video_latent(latent, model, statistics) for name, latent in named.items()}
        # A copy: the loaded statistics go back to the meta device when they are released.
        return upsampled, copy.deepcopy(statistics)


def standalone_source(files: ModelFiles, path: Path) -> Path | ComponentSource:
    """A model file outside the set (the latent upsampler) read through the set's headers, which a command
    line's checks filled already; a folder (a diffusers `latent_upsampler/`) as it is."""
    if Path(path).is_dir():
        return path
    return ComponentSource(None, (Path(path),)).sharing(files.headers)


def _refinement_denoiser(
    pipeline: Pipeline, shape: VideoPixelShape, contexts: TextContexts
) -> Callable[[nn.Module], Denoiser]:
    """The refinement stage's denoiser over the stage transformer, or over several devices the model the
    devices run at `shape` (possibly one tile per rank)."""
    parallel = pipeline.parallel
    return lambda model: SimpleDenoiser(
        X0Model(model if parallel is None else parallel.refinement_transformer(model, shape)),
        contexts.video,
        contexts.audio,
    )


def guided_two_stages(
    pipeline: PromptPipeline,
    spatial_upsampler: Path,
    shape: VideoPixelShape,
    noise: NoiseSource,
    inputs: GuidedInputs,
    *,
    stage_1: StagePlan,
    stage_2: StagePlan,
    max_batch_size: int | None,
    images: Sequence[ImageCondition] = (),
    images_as_keyframes: bool = False,
    ship_refined_audio: bool = False,
    generated_keyframes: GeneratedKeyframes = 0,
) -> FinalLatents:
    """The text/image-to-video two-stage run's final latents: stage 1 guided by `inputs`, stage 2 refined
    without guidance. `ship_refined_audio`: see `two_stage_latents` (the reference's choice for
    text/image-to-video). `generated_keyframes`: stage-1 keyframe slots (see `run_two_stages`)."""
    return two_stage_latents(
        pipeline, spatial_upsampler, shape, noise, stage_1=stage_1, stage_2=stage_2,
        stage_1_denoiser=lambda model: stage_guided_denoiser(model, inputs, max_batch_size, pipeline.step_cache),
        refine_contexts=inputs.positive, images=images, images_as_keyframes=images_as_keyframes,
        generated_keyframes=generated_keyframes, ship_refined_audio=ship_refined_audio,
    )  # fmt: skip


def two_stage_latents(
    pipeline: Pipeline,
    spatial_upsampler: Path,
    shape: VideoPixelShape,
    noise: NoiseSource,
    *,
    ship_refined_audio: bool,
    **stages: Any,
) -> FinalLatents:
    """Both stages (`run_two_stages` with `stages`) to the final latents: stage 2's video, and stage 2's audio
    when `ship_refined_audio` and the refinement's audio is usable (not over tiles: a tiled stage's audio is a
    mean over tiles that each saw part of the video), else the audio of stage 1."""
    result = run_two_stages(pipeline, spatial_upsampler, shape, noise, **stages)
    refined = result.refined
    usable = pipeline.parallel is None or pipeline.parallel.refined_audio_is_usable
    audio = refined.audio_latent if ship_refined_audio and usable else result.stage_1.audio_latent
    return finished_latents(pipeline, shape, refined.video_latent, audio, noise, result.latents)


def distilled_lora_stages(
    loras: tuple[LoraSpec, ...], distilled_lora: LoraSpec | None
) -> tuple[tuple[LoraSpec, ...], tuple[LoraSpec, ...]]:
    """The LoRAs of the stage-1 and the stage-2 transformer: `loras` in both, the distilled LoRA (when
    given) in stage 2 only."""
    distilled = () if distilled_lora is None else (distilled_lora,)
    return loras, (*loras, *distilled)


def refinement_sigmas(pipeline: PromptPipeline) -> torch.Tensor:
    """The stage-2 sigmas of the guided two-stage pipelines: the distilled ones, or over tiles (several
    devices) the reference's tiled schedule."""
    single = stage_2_distilled_sigmas()
    return single if pipeline.parallel is None else pipeline.parallel.refinement_sigmas(single)
