"""Where the LTX-2.3 22B video VAE decoder spends its time on the CPU: op table and time per block.

Builds the released decoder architecture (random weights, see `video_vae_decode.py`), decodes one
latent untiled once to warm up, then once under `torch.profiler` with timing hooks on every
top-level block. Prints the top ops by self CPU time and the seconds spent in each block.

    uv run python benchmarks/video_vae_profile.py                      # bf16, latent 2 x 4 x 6
    uv run python benchmarks/video_vae_profile.py --dtype fp32 --latent 3 8 12

`video_vae_profile.md` holds this script's output before and after the decoder changes that
followed from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from video_vae_decode import _keys_json, _random_decoder

from ltx_core.devices import parse_dtype


def _block_timers(decoder: torch.nn.Module) -> dict[str, float]:
    spent: dict[str, float] = {}
    started: dict[str, float] = {}
    named = [("conv_in", decoder.conv_in)]
    named += [(f"up_blocks.{i} {type(b).__name__}", b) for i, b in enumerate(decoder.up_blocks)]
    named += [("conv_norm_out", decoder.conv_norm_out), ("conv_out", decoder.conv_out)]
    for name, module in named:
        module.register_forward_pre_hook(lambda m, a, name=name: started.__setitem__(name, time.perf_counter()))
        module.register_forward_hook(
            lambda m, a, o, name=name: spent.__setitem__(
                name, spent.get(name, 0.0) + time.perf_counter() - started[name]
            )
        )
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--latent", type=int, nargs=3, default=[2, 4, 6], metavar=("F", "H", "W"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = parse_dtype(args.dtype)
    decoder = _random_decoder(json.loads(_keys_json().read_text())["config"], dtype)
    latent = torch.randn(1, decoder.config.latent_channels, *args.latent, generator=torch.Generator().manual_seed(1))
    latent = latent.to(dtype)
    with torch.inference_mode():
        decoder(latent)  # warm-up (oneDNN primitive creation, float32 weight copies)
        spent = _block_timers(decoder)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            out = decoder(latent)
            total = time.perf_counter() - start
    print(f"decode {tuple(latent.shape)} -> {tuple(out.shape)}, {args.dtype}, {args.threads} threads: {total:.2f} s")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    print("time per block:")
    for name, seconds in spent.items():
        print(f"  {name:<40}{seconds:8.2f} s {100 * seconds / total:6.1f} %")


if __name__ == "__main__":
    main()
