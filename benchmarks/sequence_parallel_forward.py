"""Multi-process transformer forward throughput over 1..N processes, as a ratio to 1: sequence parallel
(Ulysses, exact) and tiled data parallel (one overlapping spatial tile per rank, the stage-2 mode).

A mid-size random model (4 blocks, video 12 heads x 64, audio 12 heads x 32; 12 heads divide by 1,
2, 3, 4, 6), a `--grid F H W` latent video (F*H*W tokens) + 128 audio tokens, one text context. Each world size runs in
fresh processes (torch.multiprocessing spawn; gloo on CPU, NCCL on CUDA, one GPU per rank); rank 0
reports the fastest of `--repeats` forwards (wall time after a barrier) and its peak memory. On the
CPU the ranks share the machine's cores (threads per rank = cores / world size), so the ratio shows
the communication overhead more than a speed-up on a 2-core box.

    uv run python benchmarks/sequence_parallel_forward.py                         # CPU, 1 2 3 processes
    uv run python benchmarks/sequence_parallel_forward.py --device cuda --world-sizes 1 2 4 8 \\
        --grid 16 32 48 --layers 8 --dtype bf16                                  # a multi-GPU node (24k tokens)
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from ltx_core.devices import parse_dtype
from ltx_core.latent_tiles import balanced_tile_counts
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.model.transformer import Modality, ModelVariant, configure_transformer
from ltx_core.multigpu import SequenceParallelTransformer, TiledDataParallelTransformer
from ltx_core.multigpu.launch import default_backend, run_ranks
from ltx_core.types import VideoPixelShape

CONFIG = {
    "num_attention_heads": 12,
    "attention_head_dim": 64,
    "cross_attention_dim": 768,
    "audio_num_attention_heads": 12,
    "audio_attention_head_dim": 32,
    "audio_cross_attention_dim": 384,
    "apply_gated_attention": True,
    "cross_attention_adaln": True,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "frequencies_precision": "float64",
    "rope_type": "split",
}
AUDIO_TOKENS, TEXT_TOKENS = 128, 128


def _inputs(grid: tuple[int, int, int], device: torch.device, dtype: torch.dtype) -> tuple[Modality, Modality]:
    g = torch.Generator().manual_seed(0)
    frames, height, width = grid
    video_tokens = frames * height * width
    shape = VideoPixelShape(1, (frames - 1) * 8 + 1, height * 32, width * 32, 24.0)
    video_pos = VideoLatentTools.from_pixel_shape(shape).positions()
    a = torch.arange(AUDIO_TOKENS, dtype=torch.float32) * 0.04
    audio_pos = torch.stack([a, a + 0.04], -1)[None, None]
    sigma = torch.tensor([0.8])

    def make(tokens, positions, width):
        return Modality(
            latent=torch.randn(1, tokens, 128, generator=g).to(device, dtype),
            timesteps=torch.full((1, tokens, 1), 0.8, device=device),
            sigma=sigma.to(device),
            positions=positions.to(device),
            context=torch.randn(1, TEXT_TOKENS, width, generator=g).to(device, dtype),
        )

    return make(video_tokens, video_pos, 768), make(AUDIO_TOKENS, audio_pos, 384)


def _job(rank: int, world: int, mode: str, device_type: str, dtype_name: str, layers: int,
         grid: tuple[int, int, int], overlap: int, repeats: int, out: str) -> None:  # fmt: skip
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dtype = parse_dtype(dtype_name)
    torch.manual_seed(0)
    model = configure_transformer({"transformer": {**CONFIG, "num_layers": layers}}, ModelVariant.AUDIO_VIDEO)
    model = model.to(device, dtype).eval().requires_grad_(False)
    if mode == "sequence":
        model = SequenceParallelTransformer(model)
    else:
        model = TiledDataParallelTransformer(model, grid, balanced_tile_counts(world, grid[1], grid[2], overlap))
    video, audio = _inputs(grid, device, dtype)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first is a warm-up
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            model(video, audio)
            if device.type == "cuda":
                torch.cuda.synchronize()
            dist.barrier()
            best = min(best, time.perf_counter() - start)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if rank == 0:
        Path(out).write_text(f"{best} {peak}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--modes", nargs="+", default=["sequence", "tiled"], choices=["sequence", "tiled"])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--grid", type=int, nargs=3, default=[2, 32, 32], metavar=("F", "H", "W"))
    parser.add_argument("--tile-overlap", type=int, default=5, help="latent cells shared by tiles (tiled mode)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.device == "cuda" and max(args.world_sizes) > torch.cuda.device_count():
        sys.exit(f"--world-sizes up to {max(args.world_sizes)} but only {torch.cuda.device_count()} GPUs")
    grid = tuple(args.grid)
    video_tokens = grid[0] * grid[1] * grid[2]
    print(f"{args.layers} blocks, {video_tokens} video tokens ({'x'.join(map(str, grid))}) + {AUDIO_TOKENS} audio "
          f"tokens, {args.dtype} on {args.device}")  # fmt: skip
    base = None  # the first run (1 process, no split when world sizes start at 1) is every ratio's reference
    with tempfile.TemporaryDirectory() as folder:
        for mode in args.modes:
            for world in args.world_sizes:
                out = str(Path(folder) / f"{mode}{world}.txt")
                job_args = (mode, args.device, args.dtype, args.layers, grid, args.tile_overlap, args.repeats, out)
                run_ranks(_job, world, args=job_args, backend=default_backend(args.device), timeout_s=1800)
                seconds, peak = map(float, Path(out).read_text().split())
                base = base or seconds
                tokens_per_s = (video_tokens + AUDIO_TOKENS) / seconds
                print(f"{mode:8s} world {world}: {seconds * 1000:8.1f} ms/forward  {tokens_per_s:9.0f} tokens/s  "
                      f"throughput x{base / seconds:.2f} vs the first run  peak {peak:.0f} MiB (rank 0)")  # fmt: skip


if __name__ == "__main__":
    main()
