"""LTX-2.5 diffusion video decoder on the CPU: attention backends, vs the conv decoder, tiled vs untiled.

    uv run python benchmarks/diffusion_vae_decode.py attention   # eager gather vs blocked (vs natten)
    uv run python benchmarks/diffusion_vae_decode.py decoders    # diffusion vs LTX-2.3 conv decoder
    uv run python benchmarks/diffusion_vae_decode.py tiling      # diffusion decoder untiled vs tiled

`attention` times one neighborhood-attention call per backend on stage-shaped inputs (best of 3).
`decoders` decodes the same random latent with the released diffusion-decoder architecture (the
`DiffusionDecoderConfig` defaults: 1024..128 channels, depths 4/6/4/2/8, 2 steps; `--arch small` for a
reduced one) and with the
released LTX-2.3 conv decoder (`vae` config of `ltx-2.3-22b-keys.json`), both with random float32
weights. `tiling` decodes one latent untiled, with the tiles `recommended_tiling` picks for a given
budget, and with small explicit tiles. Every decode runs in its own process, so its peak resident
set size (ru_maxrss, weights included) belongs to that decode alone. Figures are printed, not asserted.

Measured on a shared 2-core CPU host (load ~9, so absolute seconds are inflated; ratios hold better):
  attention, ms: (9,32,48) 2x64 k(3,7,7): gather 15494, blocked 1881 (8.2x); (17,24,32) 1x16 k(3,3,3):
    gather 160, blocked 141; (5,8,12) 16x64 k(3,7,7): gather 4935, blocked 184 (27x)
  decoders at 9 x 128 x 192: released diffusion 870 s, peak RSS 1793 MiB (weights 400 MiB; the latent is
    edge-padded to the stage-1 7x7 floor, so it denoises a 17 x 224 x 224 canvas); LTX-2.3 conv 38 s,
    2227 MiB (weights 1553 MiB)
  tiling, small arch at 17 x 256 x 384: untiled 43.5 s / 1018 MiB; `recommended_tiling` for 0.6 GiB free
    (width 224/32, 2 tiles) 59.9 s / 895 MiB; 128/64 px tiles (12 tiles) 276 s / 748 MiB (599 MiB after
    building = interpreter + torch)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from ltx_core.model.video_vae import AxisTiling, TilingConfig, video_decoder_from_config
from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx_core.model.video_vae.neighborhood_attention import BACKENDS, natten_available

SMALL_TILES = TilingConfig(AxisTiling(), AxisTiling(128, 64), AxisTiling(128, 64))
# `--arch small`: the released layout at a quarter of the widths and fewer blocks, for quick runs.
ARCHITECTURES = {
    "released": DiffusionDecoderConfig(),
    "small": DiffusionDecoderConfig(
        head_dim=32,
        t_emb_dim=128,
        stage_channels=(256, 128, 64, 64, 32),
        stage_depths=(1, 2, 1, 1, 2),
        stage_kernels=((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5), (3, 3, 3)),
        stage5_kernel=(3, 7, 7),
    ),
}


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _randomize(module: torch.nn.Module) -> torch.nn.Module:
    module = module.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("timestep_scale_multiplier"):
                p.fill_(1000.0)
            elif "norm" in name and p.ndim == 1:
                p.fill_(1.0)
            else:
                fan_in = p[0].numel() if p.ndim > 1 else 1
                p.normal_(0.0, 0.5 * fan_in**-0.5, generator=g)
        stats = module.per_channel_statistics
        stats.get_buffer("std-of-means").fill_(1.0)
        stats.get_buffer("mean-of-means").zero_()
    return module.eval().requires_grad_(False)


def _conv_decoder() -> torch.nn.Module:
    golden = os.environ.get("LTX_GOLDEN_DIR")
    root = Path(golden) if golden else Path(__file__).resolve().parents[1] / "tests" / "golden"
    config = json.loads((root / "ltx-2.3-22b-keys.json").read_text())["config"]
    with torch.device("meta"):
        return _randomize(video_decoder_from_config(config))


def _diffusion_decoder(arch: str) -> torch.nn.Module:
    with torch.device("meta"):
        return _randomize(DiffusionVideoDecoder(ARCHITECTURES[arch]))


def child(args: argparse.Namespace) -> dict:
    """One decode in this process: which decoder, which tiling; seconds and peak RSS."""
    torch.set_num_threads(os.cpu_count() or 1)
    decoder = _diffusion_decoder(args.arch) if args.decoder == "diffusion" else _conv_decoder()
    scale = decoder.scale
    latent = torch.randn(
        1,
        128,
        (args.frames - 1) // scale.time + 1,
        args.height // scale.height,
        args.width // scale.width,
        generator=torch.Generator().manual_seed(1),
    )
    tiling: TilingConfig | None = None
    if args.tiling == "small":
        tiling = SMALL_TILES
    elif args.tiling == "budget":
        tiling = decoder.recommended_tiling(latent.shape, free_bytes=int(args.budget_gib * 2**30))
    rss_built = _peak_rss_mib()
    start = time.perf_counter()
    frames = 0
    with torch.inference_mode():
        for chunk in decoder.decode_video(latent, tiling, generator=torch.Generator().manual_seed(2)):
            frames += chunk.shape[0]  # a real caller would write the chunk out here
            del chunk
    return {
        "seconds": round(time.perf_counter() - start, 1),
        "peak_rss_mib": round(_peak_rss_mib()),
        "rss_after_build_mib": round(rss_built),
        "weights_mib": round(sum(p.numel() * p.element_size() for p in decoder.parameters()) / 2**20),
        "frames": frames,
        "tiling": "untiled" if tiling is None else tiling.describe(),
    }


def _spawn(args: argparse.Namespace, decoder: str, tiling: str) -> dict:
    cmd = [sys.executable, __file__, "child", "--decoder", decoder, "--tiling", tiling]
    cmd += ["--frames", str(args.frames), "--height", str(args.height), "--width", str(args.width)]
    cmd += ["--budget-gib", str(args.budget_gib), "--arch", args.arch]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return json.loads(out)


def _report(label: str, r: dict) -> None:
    print(
        f"{label:>28}: {r['seconds']:7.1f} s  peak RSS {r['peak_rss_mib']:6d} MiB "
        f"(after building {r['rss_after_build_mib']} MiB, weights {r['weights_mib']} MiB)  {r['tiling']}",
        flush=True,
    )


def attention(args: argparse.Namespace) -> None:
    names = [n for n in BACKENDS if n != "natten" or natten_available()]
    print(f"neighborhood attention, CPU, {torch.get_num_threads()} threads, best of 3 (ms):")
    for dims, heads, head_dim, kernel in (
        ((9, 32, 48), 2, 64, (3, 7, 7)),  # released stage 5 (128 channels) on a 9 x 128 x 192 canvas
        ((17, 24, 32), 1, 16, (3, 3, 3)),  # the tiny golden decoder's stage 5
        ((5, 8, 12), 16, 64, (3, 7, 7)),  # released stage 1 (1024 channels) on a 5 x 8 x 12 latent
    ):
        q, k, v = (torch.randn(1, *dims, heads, head_dim) for _ in range(3))
        row = []
        for name in names:
            fn = BACKENDS[name]
            fn(q, k, v, kernel)
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                fn(q, k, v, kernel)
                best = min(best, time.perf_counter() - start)
            row.append(f"{name} {best * 1e3:8.1f}")
        print(f"  (T,H,W)={dims} heads={heads}x{head_dim} kernel={kernel}: " + "  ".join(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["attention", "decoders", "tiling", "child"])
    parser.add_argument("--frames", type=int, default=9)
    parser.add_argument("--height", type=int, default=128)
    parser.add_argument("--width", type=int, default=192)
    parser.add_argument("--decoder", choices=["diffusion", "conv"], default="diffusion")
    parser.add_argument("--tiling", choices=["none", "small", "budget"], default="none")
    parser.add_argument("--budget-gib", type=float, default=2.0, help="free memory the 'budget' tiling assumes")
    parser.add_argument("--arch", choices=sorted(ARCHITECTURES), default="released", help="diffusion decoder size")
    args = parser.parse_args()
    if args.part == "child":
        print(json.dumps(child(args)), flush=True)
        return
    if args.part == "attention":
        attention(args)
        return
    print(
        f"{args.frames} x {args.height} x {args.width}, {args.arch} diffusion decoder, float32 random weights, "
        f"CPU, {os.cpu_count()} threads"
    )
    if args.part == "decoders":
        _report("diffusion decoder (2.5)", _spawn(args, "diffusion", "none"))
        _report("conv decoder (2.3)", _spawn(args, "conv", "none"))
    else:
        _report("diffusion untiled", _spawn(args, "diffusion", "none"))
        _report(f"diffusion budget {args.budget_gib} GiB", _spawn(args, "diffusion", "budget"))
        _report("diffusion small tiles", _spawn(args, "diffusion", "small"))


if __name__ == "__main__":
    main()
