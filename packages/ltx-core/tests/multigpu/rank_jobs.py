"""Work the multi-GPU tests run inside spawned ranks; module-level so the spawn start method can import it."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist

from ltx_core.components.denoisers import GuidedDenoiser
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.latent_tiles import TileCounts
from ltx_core.model.transformer.model import LTXModel, Modality, X0Model
from ltx_core.model.video_vae.decoder import VideoDecoder
from ltx_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.multigpu.distributed_decode import decode_diffusion_tiled_distributed, decode_tiled_distributed
from ltx_core.multigpu.guidance_parallel import (
    GuidanceParallelDenoiser,
    PassGroups,
    make_pass_groups,
    pass_group_count,
    pass_group_transformer,
)
from ltx_core.multigpu.sequence_parallel import SequenceParallelTransformer
from ltx_core.multigpu.tiled_data_parallel import TiledDataParallelTransformer


def sequence_parallel_forward_job(
    rank: int, world: int, model: LTXModel, cases: list[tuple[Modality | None, Modality | None]], out_path: str
) -> None:
    """Run every (video, audio) case through the sequence-parallel model; rank 0 saves the outputs
    (a list of (video, audio) velocities) to `out_path` with torch.save, via a temporary name."""
    parallel = SequenceParallelTransformer(model.eval())
    outputs = []
    with torch.inference_mode():
        for video, audio in cases:
            outputs.append(parallel(video, audio))
    if rank == 0:
        _save(outputs, out_path)


def tiled_data_parallel_forward_job(
    rank: int,
    world: int,
    model: LTXModel,
    grid: tuple[int, int, int],
    counts: TileCounts,
    cases: list[tuple[Modality, Modality | None]],
    out_path: str,
) -> None:
    """Run every (video, audio) case through the tiled data-parallel model; rank 0 saves the outputs."""
    parallel = TiledDataParallelTransformer(model.eval(), grid, counts)
    with torch.inference_mode():
        outputs = [parallel(video, audio) for video, audio in cases]
    if rank == 0:
        _save(outputs, out_path)


def distributed_diffusion_decode_job(
    rank: int, world: int, decoder: DiffusionVideoDecoder, latent: torch.Tensor, tiling: TilingConfig | None,
    seed: int, out_path: str,
) -> None:  # fmt: skip
    """Decode `latent` with the LTX-2.5 diffusion decoder over all ranks (canvas noise from a generator
    seeded with `seed` on every rank); rank 0 saves the video, the other ranks must get no chunk."""
    with torch.inference_mode():
        chunks = list(
            decode_diffusion_tiled_distributed(decoder, latent, tiling, generator=torch.Generator().manual_seed(seed))
        )
    if rank == 0:
        _save(torch.cat(chunks, dim=2), out_path)
    elif chunks:
        raise RuntimeError(f"rank {rank} got {len(chunks)} chunk(s); only rank 0 should")


def distributed_decode_job(
    rank: int,
    world: int,
    decoder: VideoDecoder,
    latent: torch.Tensor,
    tiling: TilingConfig,
    seed: int | None,
    out_path: str,
) -> None:
    """Decode `latent` over all ranks (noise from a generator seeded with `seed`); rank 0 saves the video."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        chunks = list(decode_tiled_distributed(decoder.eval(), latent, tiling, generator))
    if rank == 0:
        _save(torch.cat(chunks, dim=2), out_path)
    elif chunks:
        raise RuntimeError(f"rank {rank} yielded {len(chunks)} decoded chunks; only rank 0 should")


def _save(value: object, out_path: str) -> None:
    target = Path(out_path)
    partial = target.with_name(target.name + ".partial")
    torch.save(value, partial)
    os.replace(partial, target)


def fail_on_rank_job(rank: int, world: int, failing_rank: int, message: str) -> None:
    """A launcher self-check: `failing_rank` raises ValueError(message) while the others wait in a
    collective that can never complete, so only the launcher's fail-fast can end the run."""
    import torch.distributed as dist

    if rank == failing_rank:
        raise ValueError(message)
    dist.barrier()


def guidance_parallel_sampling_job(
    rank: int, world: int, model: LTXModel, sampling: dict, passes: int, out_path: str
) -> None:
    """Sample `sampling` (see `sample`) with the passes spread over the ranks: as many
    pass groups as `pass_group_count(world, passes)` gives. Every rank saves its final (video, audio) latents
    and pass-group layout (count, size, its group's process-group size) to `out_path` + f".{rank}"."""
    groups = make_pass_groups(pass_group_count(world, passes))
    with torch.inference_mode():
        video, audio = sample(model.eval(), sampling, groups)
    # The size of the process group this rank's passes ran sequence parallel over (1: the rank alone).
    group_world = 1 if groups.group is None else dist.get_world_size(groups.group)
    _save({"video": video, "audio": audio, "groups": (groups.count, groups.size, group_world)}, f"{out_path}.{rank}")


def sample(model, sampling: dict, groups: PassGroups | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The final latents of `sampling`: on this process alone (`groups` None, one model call per pass) or
    with the passes spread over `groups`."""
    video_context, audio_context, negative_video, negative_audio = sampling["contexts"]
    kwargs = {
        "negative_video_context": negative_video, "negative_audio_context": negative_audio,
        "video_guidance": sampling["guidance"]["video"], "audio_guidance": sampling["guidance"]["audio"],
        "max_batch_size": 1,
    }  # fmt: skip
    if groups is None:
        denoiser = GuidedDenoiser(X0Model(model), video_context, audio_context, **kwargs)
    else:
        x0 = X0Model(pass_group_transformer(model, groups))
        denoiser = GuidanceParallelDenoiser(x0, groups, video_context, audio_context, **kwargs)
    video, audio = euler_denoising_loop(denoiser, sampling["sigmas"], sampling["video"], sampling["audio"])
    return video.latent, audio.latent
