"""Decode a video with the released LTX-2.3 22B video VAE decoder architecture on the CPU: seconds and peak RSS.

The decoder is built from the `vae` config of `ltx-2.3-22b-keys.json` (the golden folder) with random
bf16 weights. Each mode runs in its own process, so the peak resident set size (ru_maxrss) belongs to
that decode alone (weights included: ~0.8 GB in bf16).

    uv run python benchmarks/video_vae_decode.py                       # default tiling, then untiled
    uv run python benchmarks/video_vae_decode.py --modes small-tiles   # 32/8-frame, 192/64-px tiles
    uv run python benchmarks/video_vae_decode.py --frames 17 --height 128 --width 192

At 49 x 256 x 384 the default tiling (80/24 frames, 768/64 px) is a single tile, so "default" and
"untiled" decode the same way. "small-tiles" (12 tiles here) shows real tiling; it re-decodes the
overlaps, so it is slower. At this size the peak is set by the weights (plus, on CPUs without native
bf16 convolution, their float32 copy made once for CPU arithmetic, see `layers.Conv3d`); the
activations (roughly 0.5 GB here) grow with the pixel count, and those are what tiling bounds.
`video_vae_conv_modes.py` compares the native bf16 and float32-cast convolution paths.
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

from ltx_core.devices import parse_dtype
from ltx_core.model.video_vae import AxisTiling, TilingConfig, VideoDecoder, video_decoder_from_config

MODES = {
    "default": TilingConfig.default(),
    "untiled": None,
    "small-tiles": TilingConfig(AxisTiling(32, 8), AxisTiling(192, 64), AxisTiling(192, 64)),
}


def _keys_json() -> Path:
    golden = os.environ.get("LTX_GOLDEN_DIR")
    root = Path(golden) if golden else Path(__file__).resolve().parents[1] / "tests" / "golden"
    return root / "ltx-2.3-22b-keys.json"


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _random_decoder(config: dict, dtype: torch.dtype) -> VideoDecoder:
    with torch.device("meta"):
        decoder = video_decoder_from_config(config)
    decoder = decoder.to(dtype).to_empty(device="cpu")  # allocate once, directly in `dtype`
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in decoder.named_parameters():
            if name.endswith("timestep_scale_multiplier"):
                p.fill_(1000.0)
            else:
                fan_in = p[0].numel() if p.ndim > 1 else 1
                p.normal_(0.0, fan_in**-0.5, generator=g)
        stats = decoder.per_channel_statistics
        stats.get_buffer("std-of-means").fill_(1.0)
        stats.get_buffer("mean-of-means").zero_()
    return decoder.eval().requires_grad_(False)


def run_one(args: argparse.Namespace, mode: str) -> dict:
    torch.set_num_threads(os.cpu_count() or 1)
    dtype = parse_dtype(args.dtype)
    config = json.loads(_keys_json().read_text())["config"]
    decoder = _random_decoder(config, dtype)
    scale = decoder.scale
    latent = torch.randn(
        1,
        decoder.config.latent_channels,
        (args.frames - 1) // scale.time + 1,
        args.height // scale.height,
        args.width // scale.width,
        generator=torch.Generator().manual_seed(1),
    ).to(dtype)
    tiling = MODES[mode]
    tiles = len(decoder.tile_layout(latent.shape, tiling))
    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    chunks = []
    with torch.inference_mode():
        for frames in decoder.decode_video(latent, tiling):
            chunks.append(frames.shape[0])  # a real caller would write the chunk out here
            del frames
    seconds = time.perf_counter() - start
    return {
        "mode": mode,
        "tiles": tiles,
        "chunks": chunks,
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(_peak_rss_mib()),
        "rss_after_build_mib": round(rss_before),
        "weights_mib": round(sum(p.numel() * p.element_size() for p in decoder.parameters()) / 2**20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=49)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--modes", nargs="+", default=["default", "untiled"], choices=sorted(MODES))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args, args.child)), flush=True)
        return

    print(
        f"LTX-2.3 22B video VAE decoder (random weights), {args.frames} x {args.height} x {args.width}, "
        f"{args.dtype}, CPU, {os.cpu_count()} threads"
    )
    for mode in args.modes:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            mode,
            "--frames",
            str(args.frames),
            "--height",
            str(args.height),
            "--width",
            str(args.width),
            "--dtype",
            args.dtype,
        ]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        print(
            f"{r['mode']:>12}: {r['seconds']:7.1f} s  peak RSS {r['peak_rss_mib']:6d} MiB "
            f"(after building {r['rss_after_build_mib']} MiB, weights {r['weights_mib']} MiB)  "
            f"tiles {r['tiles']}  chunks {r['chunks']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
