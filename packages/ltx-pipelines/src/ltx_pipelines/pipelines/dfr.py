"""The pipeline class of `python -m ltx_pipelines.dfr`
(what it does: that module's docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import (
    ConditioningItem,
    VideoConditionByKeyframeIndex,
    VideoConditionByReferenceLatent,
    VideoGeneratedKeyframeSlots,
)
from ltx_core.loader import LoraSpec, ModelFiles
from ltx_core.model.transformer import X0Model
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import DEFAULT_SCALE_FACTORS, VideoPixelShape
from ltx_pipelines.engine import dfr_layout
from ltx_pipelines.engine.denoising_stage import (
    AncestralSampler,
    FinalLatents,
    ImageCondition,
    NoiseSource,
    SeededNoise,
    StageResult,
    Waveform,
    contexts_on,
    encode_conditioning_images,
    finished_latents,
    run_denoising_stage,
)
from ltx_pipelines.engine.generation import decode_waveform
from ltx_pipelines.engine.ic_references import reference_factors
from ltx_pipelines.engine.model_loading import loaded
from ltx_pipelines.engine.model_versions import MAX_TEMPORAL_ROUNDS
from ltx_pipelines.engine.prompt_pipeline import (
    PipelineOptions,
    TwoStagePromptPipeline,
    check_video_length,
    with_requested_frames,
)
from ltx_pipelines.engine.requests import VideoRequest, has_generated_keyframes, keyframe_embedding_problem
from ltx_pipelines.engine.two_stage_runner import (
    ConditioningHook,
    StageItems,
    StagePlan,
    run_two_stages,
    simple_denoiser,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


# Carried keyframes anchor a tile almost clean, so a tile can still settle its seam frame.
ANCHOR_KEYFRAME_STRENGTH = 0.95


TEMPORAL_ANCESTRAL_ETA = 0.5


# RoPE time is frame / fps: above this the trained token time spans no longer fit, so conditioning fps
# is capped while the playback fps keeps doubling.
MAX_CONDITIONING_FPS = 60.0


# The temporal rounds start from the distilled schedule's fifth sigma (0.975).
TEMPORAL_SIGMA_START = 4


# Each tile's ancestral stream: seed + this * round + tile (tiles are positionally alike, so one shared
# stream would re-noise them identically).
TILE_SEED_STRIDE = 1000


DEFAULT_DETAILING_DOWNSCALE = 2


def nearest_latent_frames(video_latent: torch.Tensor, positions: Sequence[int]) -> torch.Tensor:
    """The latent frames nearest to pixel `positions`, stacked (B, C, K, h, w): new slots start from them."""
    last = video_latent.shape[2] - 1
    index = [min(max(round(p / DEFAULT_SCALE_FACTORS.time), 0), last) for p in positions]
    return video_latent[:, :, index]


class DFRPipeline(TwoStagePromptPipeline):
    """DFR over LTX-2.5 model files with the keyframe embedding, an x2 spatial upsampler, Gemma, the
    detailing IC-LoRA (`detailing_lora`, fused in stage 2 only) and, for temporal rounds, the x2 temporal
    upsampler. `loras` and the `distilled_lora` (a dev transformer's; None on a distilled one) are fused in
    every stage."""

    predicts_duration = True

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        detailing_lora: Sequence[LoraSpec] = (),
        temporal_upsampler_path: str | Path | None = None,
        distilled_lora: LoraSpec | None = None,
        **options: Unpack[PipelineOptions],
    ) -> None:
        problem = keyframe_embedding_problem(checkpoint_path)
        if problem is not None:
            raise ValueError(f"DFR cannot run on {checkpoint_path}: {problem}")
        if distilled_lora is not None and not Path(distilled_lora.path).is_file():
            raise ValueError(f"distilled_lora {str(distilled_lora.path)!r}: no such file (a LoRA .safetensors file)")
        super().__init__(checkpoint_path, spatial_upsampler_path, gemma_root, **options)
        self.distilled_lora = distilled_lora
        self.temporal_upsampler_path = Path(temporal_upsampler_path) if temporal_upsampler_path else None
        self.detailing_lora = tuple(detailing_lora)
        factor = reference_factors(self.detailing_lora).downscale if self.detailing_lora else 1
        # A detailing LoRA without the metadata is the x2 one the reference ships.
        self.detailing_downscale = factor if factor != 1 else DEFAULT_DETAILING_DOWNSCALE

    def stage_loras(self) -> tuple[LoraSpec, ...]:
        """The LoRAs of stage 1 and the temporal tiles (the detailing stage adds the detailing IC-LoRA): the
        user LoRAs, then the distilled LoRA, the reference's order."""
        return (*self.loras, *([self.distilled_lora] if self.distilled_lora is not None else []))

    def generate(
        self,
        prompt: str,
        *,
        seed: int,
        video: VideoRequest = VideoRequest(),  # noqa: B008 - a frozen value
        enhance_prompt: bool = False,
        temporal_upsample_rounds: int = 0,
    ) -> FinalLatents:
        """Generate from a prompt; the same seed gives the same result. `video.images` condition stages 1 and 2
        and, tile-locally, the temporal rounds (as the reference re-attaches them). What `video` leaves unset
        takes the model version's defaults; a `duration` range (with `num_frames` None) has the duration head
        pick the requested length in that range of seconds."""
        self._check_rounds(temporal_upsample_rounds)
        _refuse_generated_keyframes(video)
        check_video_length(self.checkpoint_path, video)
        video = self.filled_video(video)
        if video.num_frames is not None:
            dfr_layout.plan_canvas(video.num_frames)
        height, width, frame_rate = video.height, video.width, video.frame_rate
        assert height is not None and width is not None and frame_rate is not None
        self.output_shape(height, width, video.num_frames or 1, frame_rate)
        (contexts,), final_prompt = self.encode_prompts(
            [prompt], seed=seed, images=video.images, enhance=enhance_prompt
        )
        video = with_requested_frames(self.checkpoint_path, self.placement, contexts, video)
        final = self.latents_from_contexts(
            contexts, video=video, noise=SeededNoise(seed), seed=seed, temporal_upsample_rounds=temporal_upsample_rounds
        )
        return replace(final, prompt=final_prompt)

    def _check_rounds(self, rounds: int) -> None:
        if not 0 <= rounds <= MAX_TEMPORAL_ROUNDS:
            raise ValueError(f"temporal_upsample_rounds must be 0, 1 or 2, got {rounds}")
        if rounds and self.temporal_upsampler_path is None:
            raise ValueError(f"temporal_upsample_rounds {rounds} needs a temporal upsampler (temporal_upsampler_path)")

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        *,
        video: VideoRequest,
        noise: NoiseSource,
        seed: int,
        temporal_upsample_rounds: int = 0,
    ) -> FinalLatents:
        """Every stage from given contexts, a filled `video` request and a noise source (the parity seam). `seed`
        numbers the tiles' ancestral streams (`seed + 1000 * round + tile`), offsets of `noise`'s own stream."""
        self._check_rounds(temporal_upsample_rounds)
        _refuse_generated_keyframes(video)
        height, width, num_frames, frame_rate = video.size
        images = video.images
        canvas = dfr_layout.plan_canvas(num_frames)
        self.output_shape(height, width, num_frames, frame_rate)
        full = VideoPixelShape(1, canvas.frames, height, width, frame_rate)
        positive = contexts_on(contexts, self.placement)
        hook = _DetailingConditioning(canvas.positions, self.detailing_downscale if self.detailing_lora else None)
        # The upsampling between the stages loads the VAE latent statistics; the temporal rounds reuse them.
        result = run_two_stages(
            self, self.spatial_upsampler_path, full, noise,
            stage_1=StagePlan(self.stage_loras(), distilled_sigmas()),
            stage_2=StagePlan((*self.stage_loras(), *self.detailing_lora), stage_2_distilled_sigmas()),
            stage_1_denoiser=simple_denoiser(positive), stage_2_denoiser=simple_denoiser(positive),
            refine_contexts=positive, images=images, hook=hook,
        )  # fmt: skip
        stage_1, stage_2, latents = result.stage_1, result.refined, result.latents
        assert stage_2.video_generated_keyframes is not None and result.latent_statistics is not None
        video = stage_2.video_latent
        if temporal_upsample_rounds:
            video = self._temporal_rounds(
                video, stage_2.video_generated_keyframes, canvas, positive, noise, seed, temporal_upsample_rounds, full,
                result.latent_statistics, latents, images,
            )  # fmt: skip
        frames = dfr_layout.output_frames(num_frames, temporal_upsample_rounds)
        video = video[:, :, : dfr_layout.output_latent_frames(frames)]
        latents["final_video_latent"] = video
        out = VideoPixelShape(1, frames, height, width, frame_rate * 2**temporal_upsample_rounds)
        final = finished_latents(self, out, video, stage_1.audio_latent, noise, latents)
        return self._audio_cut_to_video(final)

    @staticmethod
    def _audio_cut_to_video(final: FinalLatents) -> FinalLatents:
        """Stage 1's audio covers the padded canvas: ship it cut to the video's duration (decoded here, as
        the reference cuts the waveform), so the container does not outlast the picture."""
        waveform = decode_waveform(final)
        if waveform is None:
            return final
        keep = round(final.shape.frames / final.shape.fps * waveform.sample_rate)
        if keep >= waveform.samples.shape[-1]:
            return final
        return replace(final, shipped_audio=Waveform(waveform.samples[..., :keep], waveform.sample_rate))

    def _temporal_rounds(
        self,
        video: torch.Tensor,
        keyframes: torch.Tensor,
        canvas: dfr_layout.Canvas,
        contexts: TextContexts,
        noise: NoiseSource,
        seed: int,
        rounds: int,
        full: VideoPixelShape,
        statistics: nn.Module,
        latents: dict[str, torch.Tensor],
        images: Sequence[ImageCondition],
    ) -> torch.Tensor:
        """The x2 temporal rounds: upsample, sample each seam tile, stitch; carried keyframes are the
        previous round's anchors plus its new slots, all at this round's positions."""
        assert self.temporal_upsampler_path is not None
        carried: dict[int, torch.Tensor] = {p: keyframes[:, :, i : i + 1] for i, p in enumerate(canvas.positions)}
        fps = full.fps
        # The tiles run the base stage: the detailing LoRA belongs to the full-size pass only.
        with self.transformer(self.stage_loras()) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), contexts.video, contexts.audio)
            for plan in dfr_layout.plan_rounds(canvas, rounds):
                round_index, tiles = plan.index, plan.tiles
                with loaded(LATENT_UPSAMPLER, self.temporal_upsampler_path, self.placement) as up, torch.no_grad():
                    video = upsample_video_latent(video, up, statistics)
                latents[f"round_{round_index}.temporal_upsampled_latent"] = video
                fps *= 2
                carried = {2 * p: k for p, k in carried.items()}
                if tuple(sorted(carried)) != plan.seams:
                    raise RuntimeError(
                        f"temporal round {round_index}: carried keyframes at {sorted(carried)}, the layout's seams "
                        f"are {list(plan.seams)}"
                    )
                stitched, new_slots = [], {}
                for tile_index, tile in enumerate(tiles):
                    name = f"round_{round_index}.tile_{tile_index}"
                    shape = VideoPixelShape(
                        1, tile.pixel_frames, full.height, full.width, min(fps, MAX_CONDITIONING_FPS)
                    )
                    offset = TILE_SEED_STRIDE * round_index + tile_index
                    result = self._sample_tile(denoiser, video, tile, shape, carried, images, noise, name, offset)
                    latents.update(result.latents)
                    stitched.append(result.video_latent)
                    if result.video_generated_keyframes is not None:
                        for i, p in enumerate(tile.slots):
                            # A lead-in repeats the previous tile's slots: the earlier tile's wins.
                            new_slots.setdefault(p, result.video_generated_keyframes[:, :, i : i + 1])
                video = dfr_layout.stitch_tiles(stitched, tiles)
                carried = {**carried, **new_slots}
        return video

    def _sample_tile(
        self,
        denoiser: SimpleDenoiser,
        video: torch.Tensor,
        tile: dfr_layout.SeamTile,
        shape: VideoPixelShape,
        carried: Mapping[int, torch.Tensor],
        images: Sequence[ImageCondition],
        noise: NoiseSource,
        name: str,
        seed_offset: int,
    ) -> StageResult:
        """One seam tile of a temporal round: its images, the carried keyframes at its anchors, new slots
        starting from the nearest latent frames, sampled ancestrally on its own stream (`seed_offset`)."""
        tile_video = video[:, :, tile.latent_start : tile.latent_stop]
        items: list[ConditioningItem] = [
            *self._tile_images(images, tile, shape),
            *(
                VideoConditionByKeyframeIndex(carried[p], local, ANCHOR_KEYFRAME_STRENGTH)
                for p, local in zip(tile.anchors, tile.local(tile.anchors), strict=True)
            ),
        ]
        local_slots = tile.local(tile.slots)
        if local_slots:
            items.append(VideoGeneratedKeyframeSlots(local_slots, nearest_latent_frames(tile_video, local_slots)))
        sampler = AncestralSampler(eta=TEMPORAL_ANCESTRAL_ETA, noise_seed_offset=seed_offset)
        device, dtype = self.placement.device, self.placement.dtype
        return run_denoising_stage(
            denoiser, shape, distilled_sigmas()[TEMPORAL_SIGMA_START:], noise, name, device, dtype,
            conditionings=items, initial_video=tile_video, with_audio=False, sampler=sampler, progress=self.progress,
        )  # fmt: skip

    def _tile_images(
        self, images: Sequence[ImageCondition], tile: dfr_layout.SeamTile, shape: VideoPixelShape
    ) -> list[ConditioningItem]:
        """The images re-attached to a tile, encoded at its size: all of them on a tile that starts the clip;
        on a later one only those whose frame index falls in its window, shifted to tile-local frames (frame
        indices read in the round's frame grid, as the reference does)."""
        if tile.pixel_start > 0:
            images = [
                replace(image, frame_idx=image.frame_idx - tile.pixel_start)
                for image in images
                if tile.pixel_start <= image.frame_idx <= tile.pixel_end
            ]
        if not images:
            return []
        return list(encode_conditioning_images(images, self.checkpoint_path, self.placement, [shape]).per_stage[0])


UPSAMPLED_SLOTS = "upsampled_slot_keyframes"


def _refuse_generated_keyframes(video: VideoRequest) -> None:
    if has_generated_keyframes(video.generated_keyframes):
        raise ValueError(
            f"DFR places its own keyframes: generated_keyframes {video.generated_keyframes!r} is not accepted "
            "(leave it 0)"
        )


@dataclass(frozen=True)
class _DetailingConditioning(ConditioningHook):
    """DFR's items: generated keyframe slots at the canvas `positions` in stage 1; in stage 2 the same slots
    starting from stage 1's upsampled, and (with a detailing LoRA, `reference_downscale` set) stage 1's video
    as the detailing reference."""

    positions: tuple[int, ...]
    reference_downscale: int | None

    def stage_1(self) -> StageItems:
        return StageItems(video=(VideoGeneratedKeyframeSlots(self.positions),))

    def upsampled_too(self, first: StageResult) -> dict[str, torch.Tensor]:
        assert first.video_generated_keyframes is not None
        return {UPSAMPLED_SLOTS: first.video_generated_keyframes}

    def stage_2(self, first: StageResult, upsampled: Mapping[str, torch.Tensor]) -> StageItems:
        items: list[ConditioningItem] = [VideoGeneratedKeyframeSlots(self.positions, upsampled[UPSAMPLED_SLOTS])]
        if self.reference_downscale is not None:
            assert first.video_latent is not None
            items.append(VideoConditionByReferenceLatent(first.video_latent, downscale_factor=self.reference_downscale))
        return StageItems(video=tuple(items))
