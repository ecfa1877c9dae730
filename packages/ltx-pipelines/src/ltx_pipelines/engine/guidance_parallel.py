"""Guided stages over several devices with the guidance passes spread over the ranks (`--guidance-parallel`).

`MultiDevice(guidance_parallel=True)` hands the pipeline a `GuidanceParallelTransformer` as its stage
transformer; `stage_guided_denoiser` sees it and asks `guidance_parallel_denoiser` for the denoiser: the
ranks form pass groups for the stage's guidance (`ltx_core.multigpu.guidance_parallel`), each group runs
its passes (sequence parallel inside the group when it has several ranks) and every rank combines them.
Stages without guidance (stage 2 of the two-stage pipelines) call the transformer itself, which runs
sequence parallel over all ranks as without the flag.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ltx_core.components.denoisers import guidance_passes
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.model.transformer import X0Model
from ltx_core.multigpu.comm import world_rank
from ltx_core.multigpu.guidance_parallel import (
    GuidanceParallelDenoiser,
    GuidanceParallelTransformer,
    make_pass_groups,
    pass_group_count,
    pass_group_transformer,
)

if TYPE_CHECKING:
    from torch import nn

    from ltx_pipelines.engine.guided import GuidedInputs

logger = logging.getLogger(__name__)


def stage_pass_count(video: MultiModalGuiderParams, audio: MultiModalGuiderParams) -> int:
    """The passes a guided step of both modalities makes with these params (the most a stage makes)."""
    return len(guidance_passes({"video": video, "audio": audio}))


def guidance_parallel_denoiser(
    transformer: nn.Module, inputs: GuidedInputs, max_batch_size: int | None, step_cache: float | None
) -> GuidanceParallelDenoiser | None:
    """The guidance-parallel denoiser of a guided stage over `transformer`, or None when `transformer` is not
    run guidance parallel. Collective: every rank calls it at the same point of the same stage."""
    if not isinstance(transformer, GuidanceParallelTransformer):
        return None
    if step_cache is not None:
        # The cache matches calls by shape and perturbation: per-pass calls of cond and uncond would share entries.
        raise ValueError("the step cache does not combine with guidance parallel; leave out one of them")
    settings = inputs.settings
    world, _ = world_rank()
    passes = stage_pass_count(settings.video, settings.audio)
    groups = make_pass_groups(pass_group_count(world, passes))
    logger.info(
        "guidance parallel: %d passes per step over %d group(s) of %d rank(s)", passes, groups.count, groups.size
    )
    negative = inputs.negative
    return GuidanceParallelDenoiser(
        X0Model(pass_group_transformer(transformer.model, groups)),
        groups,
        inputs.positive.video,
        inputs.positive.audio,
        negative_video_context=None if negative is None else negative.video,
        negative_audio_context=None if negative is None else negative.audio,
        video_guidance=settings.video,
        audio_guidance=settings.audio,
        max_batch_size=max_batch_size,
    )
