"""Guidance-parallel sampling: the guidance passes of one step run on different ranks, then are shared.

A guided step makes up to four full-sequence transformer calls (cond, negative prompt, STG-perturbed,
modality-isolated; `GuidedDenoiser`). Here the ranks of the default process group form `count` pass
groups of `size` consecutive ranks each; pass i of a step runs on group i mod `count` (sequence
parallel over the group's ranks when `size` > 1), and each pass's x0 is broadcast from its group's
first rank to every rank. Every rank then combines the same predictions with the same guider, so all
ranks hold the same latents.

Why: a pass needs only its own x0 back (B * T * C values per modality), while sequence parallel moves
every attention layer's queries, keys, values and outputs through all-to-alls; passes are independent,
so they spread over devices with far less traffic (`benchmarks/guidance_parallel_comm.py`).

Numerics: each pass is one model call (chunked by `max_batch_size` as the single-process denoiser
chunks it), so on one group of size 1 a pass's x0 is the single-process `max_batch_size=batch` call's,
bit for bit at equal CPU thread counts; groups larger than one add the sequence-parallel rounding.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ltx_core.components.denoisers import GuidedDenoiser, call_in_chunks
from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.multigpu.comm import world_rank
from ltx_core.multigpu.sequence_parallel import SequenceParallelTransformer
from ltx_core.multigpu.wrapped_transformer import WrappedTransformer
from ltx_core.types import LatentState

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassGroups:
    """This rank's place among `count` groups of `size` consecutive ranks (`count * size` = world size).

    `group` is this rank's process group for sequence parallel inside the group (None when `size` is 1:
    the pass runs on this rank alone)."""

    count: int
    size: int
    rank: int
    group: Any = None

    @property
    def index(self) -> int:
        """The group this rank belongs to."""
        return self.rank // self.size

    def leader(self, group_index: int) -> int:
        """The global rank that sends group `group_index`'s results to the others."""
        return group_index * self.size

    def owner(self, pass_index: int) -> int:
        """The group that runs pass `pass_index` of a step (round robin)."""
        return pass_index % self.count


def pass_group_count(world: int, passes: int) -> int:
    """How many pass groups `world` ranks form for steps of up to `passes` passes: the largest divisor of
    `world` not above `passes`, so that groups are equal (each runs sequence parallel over world / count
    ranks) and no group sits idle on a step that makes `passes` passes."""
    if world < 1 or passes < 1:
        raise ValueError(f"world size and pass count must be >= 1, got world={world}, passes={passes}")
    return max(d for d in range(1, min(world, passes) + 1) if world % d == 0)


def make_pass_groups(count: int) -> PassGroups:
    """Split the default process group into `count` pass groups. Collective: every rank must call it, with
    the same `count`, in the same order relative to other group creations (`dist.new_group` requires it)."""
    world, rank = world_rank()
    if count < 1 or world % count:
        raise ValueError(f"{world} ranks cannot form {count} equal guidance-pass groups (use a divisor of {world})")
    size = world // count
    mine = None
    if size > 1:
        for index in range(count):
            # Every rank creates every group, members or not: new_group is collective over the default group.
            created = dist.new_group(list(range(index * size, (index + 1) * size)))
            if index == rank // size:
                mine = created
    return PassGroups(count=count, size=size, rank=rank, group=mine)


def pass_group_transformer(transformer: nn.Module, groups: PassGroups) -> nn.Module:
    """The transformer one pass group runs: sequence parallel over the group's ranks, or the model itself."""
    return transformer if groups.size == 1 else SequenceParallelTransformer(transformer, groups.group)


class GuidanceParallelDenoiser(GuidedDenoiser):
    """A `GuidedDenoiser` whose passes are spread over pass groups (see the module docstring).

    `model` is the x0 model this rank's group runs (over `pass_group_transformer`); the other arguments are
    `GuidedDenoiser`'s. Every rank of the default group must call it on every step with the same states."""

    def __init__(self, model: Any, groups: PassGroups, *args: Any, **kwargs: Any) -> None:
        super().__init__(model, *args, **kwargs)
        self.groups = groups

    def _predict(
        self,
        states: dict[str, LatentState],
        passes: list[Any],
        sigma: float | torch.Tensor,
        skipping: dict[str, bool],
    ) -> dict[str, torch.Tensor | None]:
        groups = self.groups
        mine: dict[int, dict[str, torch.Tensor | None]] = {}
        for i, one_pass in enumerate(passes):
            if groups.owner(i) == groups.index:
                inputs, perturbations = self._pass_inputs(states, [one_pass], sigma, skipping)
                video, audio = call_in_chunks(
                    self.model, inputs["video"], inputs["audio"], perturbations, self.max_batch_size
                )
                mine[i] = {"video": video, "audio": audio}
        outputs: dict[str, torch.Tensor | None] = {"video": None, "audio": None}
        for name, state in states.items():
            if skipping[name]:
                continue  # its last guided x0 is reused; nothing of this pass's output is read
            shared = []
            for i, one_pass in enumerate(passes):
                buffer = mine[i][name] if i in mine else torch.empty_like(state.latent)
                if buffer is None:
                    raise ValueError(f"the model returned no {name} prediction for the {one_pass.name} pass")
                if buffer.shape != state.latent.shape or buffer.dtype != state.latent.dtype:
                    # Receivers size their buffers from the state: a different x0 would garble the broadcast.
                    raise ValueError(
                        f"the {one_pass.name} pass's {name} x0 is {tuple(buffer.shape)} {buffer.dtype}; guidance "
                        f"parallel needs the state's {tuple(state.latent.shape)} {state.latent.dtype}"
                    )
                if groups.count > 1:
                    buffer = buffer.contiguous()
                    dist.broadcast(buffer, src=groups.leader(groups.owner(i)))
                shared.append(buffer)
            outputs[name] = torch.cat(shared)
        return outputs


class GuidanceParallelTransformer(WrappedTransformer):
    """A stage transformer whose guided stages spread their passes over the ranks (the pipelines build a
    `GuidanceParallelDenoiser` over `model` when they see it). Called directly (a stage without guidance)
    it runs sequence parallel over all ranks, or, when the ranks do not divide the attention heads, the
    whole call on every rank (the same result, no speed-up)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__(model)
        world, _ = world_rank()
        try:
            self.whole: nn.Module = SequenceParallelTransformer(model) if world > 1 else model
        except ValueError:
            logger.info("the %d ranks do not divide the attention heads: unguided stages run whole on each rank", world)
            self.whole = model

    def forward(
        self, video: Any, audio: Any, perturbations: BatchedPerturbationConfig | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        return self.whole(video, audio, perturbations)
