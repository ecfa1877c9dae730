"""What the `*_mgpu` pipelines add to their single-device twins: the transformer run sequence
parallel over the process group, the prompt encoded once (on rank 0) and broadcast, and the video
decoded tile-parallel over the ranks (blended on rank 0).

Every rank must consume its Generation's frames: on rank 0 they are the video, on the others the
iteration decodes and sends their tiles and yields nothing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields

import torch
import torch.distributed as dist
from torch import nn

from ltx_core.loader import LoraSpec, StateDictCache, build_model
from ltx_core.model.video_vae import VIDEO_DECODER
from ltx_core.model.video_vae.decoder import to_rgb_frames
from ltx_core.multigpu import SequenceParallelTransformer, world_rank
from ltx_core.multigpu.distributed_decode import decode_tiled_distributed
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.model_loading import release
from ltx_pipelines.engine.noise import NoiseSource, fork_noise
from ltx_pipelines.engine.stages import ImageCondition, decoder_noise


@dataclass(frozen=True)
class DistributedFinalLatents(FinalLatents):
    """`FinalLatents` whose video decode spreads the tiles over the ranks (same frames as one process)."""

    def decode_frames(self) -> Iterator[torch.Tensor]:
        return _distributed_frames(self)


def _distributed_frames(final: FinalLatents) -> Iterator[torch.Tensor]:
    placement = final.placement
    decoder = None
    try:
        decoder = build_model(VIDEO_DECODER, final.checkpoint, dtype=placement.dtype, device=placement.device)
        latent = final.video
        # Every rank draws the same per-tile noise, in tile order, as the single-process decode does.
        tile_noise = decoder_noise(decoder, latent, final.tiling, fork_noise(final.noise))
        with torch.no_grad():
            for chunk in decode_tiled_distributed(decoder, latent, final.tiling, noise=tile_noise):
                yield to_rgb_frames(chunk)
    finally:
        release(decoder)


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
