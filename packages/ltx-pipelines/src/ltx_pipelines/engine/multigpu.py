"""Pipelines over several devices: `MultiDevice`, the value a pipeline takes as `parallel=` (the `*_mgpu`
modules build their single-device twin with it).

- The transformer runs sequence parallel over the process group (faithful: the same velocities as one
  process). Stage 2 of the two-stage pipelines may instead run tiled data parallel
  (`stage_2_parallel="tiled"`): the frame is split into overlapping spatial tiles, one per rank, blended
  back (an approximation; the stage's audio is then not shipped, the stage-1 audio is).
- With `guidance_parallel`, guided stages run each step's guidance passes on different ranks instead (pass
  groups, sequence parallel inside a group of several ranks; `engine/guidance_parallel.py`); stages without
  guidance stay sequence parallel over all ranks.
- Gemma: each prompt (positive, negative) is encoded on its own rank (prompt i on rank i mod N) and the
  contexts are shared with every rank; ranks without a prompt never load Gemma.
- The video is decoded tile-parallel over the ranks and blended on rank 0 (the decode step's distributed
  variant, `engine/generation.py`): every rank must decode; rank 0 gets the frames, the others none."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ltx_core.latent_tiles import balanced_tile_counts
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.multigpu import (
    GuidanceParallelTransformer,
    SequenceParallelTransformer,
    TiledDataParallelTransformer,
    world_rank,
)
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.model_versions import DEFAULT_STAGE_2_TILE_OVERLAP, STAGE_2_PARALLEL_MODES, Stage2Parallel

logger = logging.getLogger(__name__)


EncodedPrompts = tuple[list[TextContexts], str]
"""Each prompt's contexts and the first prompt as encoded (rewritten when enhanced)."""
PromptEncoder = Callable[[Sequence[str], bool], EncodedPrompts]
"""Encodes prompts on this rank: (prompts, enhance the first) -> `EncodedPrompts`."""
TILED_STAGE_2_SIGMAS = (0.625, 0.4, 0.0)
"""The reference's stage-2 schedule for tiled runs of the guided two-stage pipelines: a lower first sigma
than the single-device one (0.909375) leaves the independently denoised tiles less room to drift apart."""


@dataclass(frozen=True)
class MultiDevice:
    """How a pipeline runs over the ranks of the default process group, passed to its constructor as
    `parallel=MultiDevice(...)`: every rank builds the same pipeline and sees the same latents.

    The pipeline asks it to wrap each stage transformer (sequence parallel), for the model of a refinement
    stage (tiled data parallel when `stage_2_parallel="tiled"` and there are several ranks), to encode the
    prompts (one per rank, shared) and to spread the video decode over the ranks.
    """

    stage_2_parallel: Stage2Parallel = "sequence"
    stage_2_tile_overlap: int = DEFAULT_STAGE_2_TILE_OVERLAP
    """Latent cells neighbouring stage-2 tiles share."""
    guidance_parallel: bool = False
    """Guided stages spread each step's guidance passes over the ranks (`engine/guidance_parallel.py`)."""

    def __post_init__(self) -> None:
        if self.stage_2_parallel not in STAGE_2_PARALLEL_MODES:
            raise ValueError(
                f"stage_2_parallel must be one of {', '.join(STAGE_2_PARALLEL_MODES)}, got {self.stage_2_parallel!r}"
            )
        if self.stage_2_tile_overlap < 0:
            raise ValueError(f"stage_2_tile_overlap must be >= 0 latent cells, got {self.stage_2_tile_overlap}")

    @property
    def tiles_stage_2(self) -> bool:
        return self.stage_2_parallel == "tiled" and world_rank()[0] > 1

    def stage_transformer(self, model: nn.Module) -> nn.Module:
        """The stage transformer run sequence parallel (the single-device velocities); with `guidance_parallel`
        one whose guided stages spread their passes over the ranks."""
        if self.guidance_parallel:
            return GuidanceParallelTransformer(model)
        return SequenceParallelTransformer(model)

    def refinement_transformer(self, transformer: nn.Module, shape: VideoPixelShape) -> nn.Module:
        """The model a refinement stage runs at `shape`: the stage transformer, or one spatial tile per rank."""
        if not self.tiles_stage_2:
            return transformer
        wrapped = (SequenceParallelTransformer, GuidanceParallelTransformer)
        model = transformer.model if isinstance(transformer, wrapped) else transformer
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
        """A tiled stage's audio is a mean over tiles that each saw part of the video: not shipped."""
        return not self.tiles_stage_2

    def refinement_sigmas(self, single_device: torch.Tensor) -> torch.Tensor:
        """(Guided two-stage pipelines) the reference's tiled schedule when stage 2 is tiled."""
        return torch.tensor(TILED_STAGE_2_SIGMAS) if self.tiles_stage_2 else single_device

    def encode_prompts(self, prompts: Sequence[str], encode: PromptEncoder, *, enhance: bool) -> EncodedPrompts:
        """Prompt i is encoded (by `encode(prompts, enhance)`) on rank i mod N, only prompt 0 ever enhanced;
        every rank gets all the contexts (on the CPU) and the final prompt."""
        world, rank = world_rank()
        if world == 1:
            return encode(prompts, enhance)
        mine = [i for i in range(len(prompts)) if i % world == rank]
        payload: tuple[dict[int, TextContexts], str | None] = ({}, None)
        if mine:
            contexts, final_prompt = encode([prompts[i] for i in mine], enhance and 0 in mine)
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

    @property
    def decodes_distributed(self) -> bool:
        """Whether the video decode is spread over the ranks (a process group of more than one)."""
        return world_rank()[0] > 1


def _on_cpu(contexts: TextContexts) -> TextContexts:
    return TextContexts(
        video=contexts.video.cpu(),
        audio=None if contexts.audio is None else contexts.audio.cpu(),
        mask=contexts.mask.cpu(),
    )
