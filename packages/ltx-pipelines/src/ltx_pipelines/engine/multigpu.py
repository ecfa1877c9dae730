"""What the `*_mgpu` pipelines add to their single-device twins.

- The transformer runs sequence parallel over the process group (faithful: the same velocities as one
  process). Stage 2 of the two-stage pipelines may instead run tiled data parallel
  (`stage_2_parallel="tiled"`): the frame is split into overlapping spatial tiles, one per rank, blended
  back (an approximation; the stage's audio is then not shipped, the stage-1 audio is).
- Gemma: each prompt (positive, negative) is encoded on its own rank (prompt i on rank i mod N) and the
  contexts are shared with every rank; ranks without a prompt never load Gemma.
- The video is decoded tile-parallel over the ranks and blended on rank 0.

Every rank must consume its Generation's frames: on rank 0 they are the video, on the others the
iteration decodes and sends their tiles and yields nothing."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal

import torch
import torch.distributed as dist
from torch import nn

from ltx_core.latent_tiles import balanced_tile_counts
from ltx_core.loader import LoraSpec, StateDictCache
from ltx_core.model.video_vae import VIDEO_DECODER
from ltx_core.model.video_vae.decoder import to_rgb_frames
from ltx_core.multigpu import SequenceParallelTransformer, TiledDataParallelTransformer, world_rank
from ltx_core.multigpu.distributed_decode import decode_tiled_distributed
from ltx_core.no_grad_iteration import no_grad_items
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.tools import VideoLatentTools
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.model_loading import release
from ltx_pipelines.engine.noise import NoiseSource, fork_noise
from ltx_pipelines.engine.stages import ImageCondition, decoder_noise

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistributedFinalLatents(FinalLatents):
    """`FinalLatents` whose video decode spreads the tiles over the ranks (same frames as one process)."""

    def decode_frames(self) -> Iterator[torch.Tensor]:
        return _distributed_frames(self)


def _distributed_frames(final: FinalLatents) -> Iterator[torch.Tensor]:
    placement = final.placement
    decoder = None
    try:
        decoder = placement.build(VIDEO_DECODER, final.checkpoint, dtype=placement.dtype, device=placement.device)
        latent = final.video
        # Every rank draws the same per-tile noise, in tile order, as the single-process decode does.
        tile_noise = decoder_noise(decoder, latent, final.tiling, fork_noise(final.noise))
        for chunk in no_grad_items(decode_tiled_distributed(decoder, latent, final.tiling, noise=tile_noise)):
            yield to_rgb_frames(chunk)
    finally:
        release(decoder)


Stage2Parallel = Literal["sequence", "tiled"]
STAGE_2_PARALLEL_MODES: tuple[str, ...] = ("sequence", "tiled")
DEFAULT_STAGE_2_TILE_OVERLAP = 5
"""Latent cells neighbouring stage-2 tiles share (the reference's overlap)."""
TILED_STAGE_2_SIGMAS = (0.625, 0.4, 0.0)
"""The reference's stage-2 schedule for tiled runs of the guided two-stage pipelines: a lower first sigma
than the single-device one (0.909375) leaves the independently denoised tiles less room to drift apart."""


class MultiDeviceMixin:
    """Put before a `PromptPipeline` subclass in the bases. Every rank builds the same pipeline and sees
    the same latents. Takes `stage_2_parallel` ("sequence" or "tiled"; default: the class's
    `default_stage_2_parallel`) and `stage_2_tile_overlap` (latent cells) on top of the pipeline's options."""

    default_stage_2_parallel: ClassVar[Stage2Parallel] = "sequence"

    def __init__(
        self,
        *args: Any,
        stage_2_parallel: Stage2Parallel | None = None,
        stage_2_tile_overlap: int = DEFAULT_STAGE_2_TILE_OVERLAP,
        **options: Any,
    ) -> None:
        mode = stage_2_parallel or self.default_stage_2_parallel
        if mode not in STAGE_2_PARALLEL_MODES:
            raise ValueError(f"stage_2_parallel must be one of {', '.join(STAGE_2_PARALLEL_MODES)}, got {mode!r}")
        if stage_2_tile_overlap < 0:
            raise ValueError(f"stage_2_tile_overlap must be >= 0 latent cells, got {stage_2_tile_overlap}")
        super().__init__(*args, **options)  # type: ignore[call-arg]
        self.stage_2_parallel: Stage2Parallel = mode
        self.stage_2_tile_overlap = stage_2_tile_overlap

    @property
    def tiles_stage_2(self) -> bool:
        return self.stage_2_parallel == "tiled" and world_rank()[0] > 1

    @contextmanager
    def transformer(self, loras: Sequence[LoraSpec], cache: StateDictCache | None = None) -> Iterator[nn.Module]:
        with super().transformer(loras, cache) as model:  # type: ignore[misc]
            yield SequenceParallelTransformer(model)

    def refinement_transformer(self, transformer: nn.Module, shape: VideoPixelShape) -> nn.Module:
        if not self.tiles_stage_2:
            return transformer
        model = transformer.model if isinstance(transformer, SequenceParallelTransformer) else transformer
        world, _ = world_rank()
        grid = VideoLatentTools.from_pixel_shape(shape).target_shape
        counts = balanced_tile_counts(world, grid.height, grid.width, self.stage_2_tile_overlap)
        logger.info(
            "stage 2 tiled over %d ranks: %dx%d tiles of the %dx%d latent, overlap %d",
            world, counts.height.tiles, counts.width.tiles, grid.height, grid.width, self.stage_2_tile_overlap,
        )  # fmt: skip
        return TiledDataParallelTransformer(model, (grid.frames, grid.height, grid.width), counts)

    @property
    def refined_audio_is_usable(self) -> bool:
        return not self.tiles_stage_2

    def default_stage_2_sigmas(self) -> torch.Tensor:
        """(Guided two-stage pipelines) the reference's tiled schedule when stage 2 is tiled."""
        if self.tiles_stage_2:
            return torch.tensor(TILED_STAGE_2_SIGMAS)
        return super().default_stage_2_sigmas()  # type: ignore[misc]

    def encode_prompts(
        self, prompts: Sequence[str], *, seed: int, images: Sequence[ImageCondition], enhance: bool
    ) -> tuple[list[TextContexts], str]:
        """Prompt i is encoded on rank i mod N (only prompt 0 is ever enhanced); every rank gets all the
        contexts (on the CPU) and the final prompt."""
        world, rank = world_rank()
        if world == 1:
            return super().encode_prompts(prompts, seed=seed, images=images, enhance=enhance)  # type: ignore[misc]
        mine = [i for i in range(len(prompts)) if i % world == rank]
        payload: tuple[dict[int, TextContexts], str | None] = ({}, None)
        if mine:
            contexts, final_prompt = super().encode_prompts(  # type: ignore[misc]
                [prompts[i] for i in mine], seed=seed, images=images, enhance=enhance and 0 in mine
            )
            payload = (
                {i: _on_cpu(c) for i, c in zip(mine, contexts, strict=True)},
                final_prompt if 0 in mine else None,
            )
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, payload)
        by_index: dict[int, TextContexts] = {}
        for part, _ in gathered:
            by_index.update(part)
        final = gathered[0][1]
        return [by_index[i] for i in range(len(prompts))], final

    def decoded(
        self,
        shape: VideoPixelShape,
        video_latent: torch.Tensor,
        audio_latent: torch.Tensor,
        noise: NoiseSource,
        latents: dict[str, torch.Tensor],
    ) -> Generation:
        generation = super().decoded(shape, video_latent, audio_latent, noise, latents)  # type: ignore[misc]
        world, _ = world_rank()
        if world > 1 and generation.final is not None:
            final = DistributedFinalLatents(**{f.name: getattr(generation.final, f.name) for f in fields(FinalLatents)})
            generation.final = final
            generation.frames = final.decode_frames()
        return generation


def _on_cpu(contexts: TextContexts) -> TextContexts:
    return TextContexts(
        video=contexts.video.cpu(),
        audio=None if contexts.audio is None else contexts.audio.cpu(),
        mask=contexts.mask.cpu(),
    )
