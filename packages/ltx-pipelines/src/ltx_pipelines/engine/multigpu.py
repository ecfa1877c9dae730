"""What the `*_mgpu` pipelines add to their single-device twins: the transformer run sequence
parallel over the process group, and the prompt encoded once (on rank 0) and broadcast."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch.distributed as dist
from torch import nn

from ltx_core.loader import LoraSpec, StateDictCache
from ltx_core.multigpu import SequenceParallelTransformer, world_rank
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.stages import ImageCondition


class SequenceParallelMixin:
    """Put before a `PromptPipeline` subclass in the bases. Every rank builds the same pipeline; the
    stage transformer is wrapped in `SequenceParallelTransformer`, so every rank sees the same latents."""

    @contextmanager
    def transformer(self, loras: Sequence[LoraSpec], cache: StateDictCache | None = None) -> Iterator[nn.Module]:
        with super().transformer(loras, cache) as model:  # type: ignore[misc]
            yield SequenceParallelTransformer(model)

    def encode_prompts(
        self, prompts: Sequence[str], *, seed: int, images: Sequence[ImageCondition], enhance: bool
    ) -> tuple[list[TextContexts], str]:
        """Gemma runs on rank 0 only; the contexts (on the CPU) and the final prompt are broadcast."""
        world, rank = world_rank()
        if world == 1:
            return super().encode_prompts(prompts, seed=seed, images=images, enhance=enhance)  # type: ignore[misc]
        payload: list[object] = [None]
        if rank == 0:
            contexts, final_prompt = super().encode_prompts(  # type: ignore[misc]
                prompts, seed=seed, images=images, enhance=enhance
            )
            payload[0] = ([_on_cpu(c) for c in contexts], final_prompt)
        dist.broadcast_object_list(payload, src=0)
        contexts, final_prompt = payload[0]  # type: ignore[misc]
        return contexts, final_prompt


def _on_cpu(contexts: TextContexts) -> TextContexts:
    return TextContexts(
        video=contexts.video.cpu(),
        audio=None if contexts.audio is None else contexts.audio.cpu(),
        mask=contexts.mask.cpu(),
    )
