"""Video VAE decode in bf16 on the CPU: native bf16 convolutions vs the float32-cast path.

The LTX-2.3 22B decoder architecture (random bf16 weights, see `video_vae_decode.py`) decodes one
latent untiled, once with every `Conv3d` pinned to native bf16 and once pinned to the float32 cast
(weights converted once and cached, activations converted per call), each in its own process.
Also prints which one this CPU's kernel choices pick (`ltx_core.tune`, timed once per machine), and the largest
difference between the two decodes (they round differently, both accumulate in float32).

    uv run python benchmarks/video_vae_conv_modes.py                          # 17 x 256 x 384
    uv run python benchmarks/video_vae_conv_modes.py --frames 9 --height 128 --width 192
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def child(args: argparse.Namespace, mode: str, out_path: str) -> dict:
    import os
    import time

    import torch

    sys.path.insert(0, str(_HERE))
    from video_vae_decode import _keys_json, _random_decoder

    from ltx_core.model.video_vae.layers import Conv3d, cpu_compute_dtype, widest_conv
    from ltx_core.tune import KernelChoices

    torch.set_num_threads(os.cpu_count() or 1)
    config = json.loads(_keys_json().read_text())["config"]
    decoder = _random_decoder(config, torch.bfloat16)
    for module in decoder.modules():
        if isinstance(module, Conv3d):
            module.cpu_half_mode = mode
    scale = decoder.scale
    latent = torch.randn(
        1, decoder.config.latent_channels, (args.frames - 1) // scale.time + 1, args.height // scale.height,
        args.width // scale.width, generator=torch.Generator().manual_seed(1),
    ).to(torch.bfloat16)  # fmt: skip
    with torch.inference_mode():
        decoder(latent[:, :, :1, :2, :2])  # warm-up: oneDNN primitive creation, float32 weight cache
        start = time.perf_counter()
        video = decoder(latent)
        seconds = time.perf_counter() - start
    torch.save(video.float(), out_path)
    probe = _random_decoder(config, torch.bfloat16)  # unpinned: what the timed choice is here
    picked = cpu_compute_dtype(widest_conv(probe), KernelChoices.load(), *latent.shape[3:])
    return {"mode": mode, "seconds": seconds, "auto_native": picked == torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=17)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args, *args.child)), flush=True)
        return
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("float32", "native"):
            out = str(Path(tmp) / f"{mode}.pt")
            cmd = [sys.executable, __file__, "--child", mode, out]
            cmd += ["--frames", str(args.frames), "--height", str(args.height), "--width", str(args.width)]
            line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            results[mode] = json.loads(line)
            print(f"{mode:>8}: {results[mode]['seconds']:.2f} s", flush=True)
        import torch

        a, b = torch.load(Path(tmp) / "float32.pt"), torch.load(Path(tmp) / "native.pt")
        diff = float((a - b).abs().max())
    ratio = results["native"]["seconds"] / results["float32"]["seconds"]
    auto = "native bf16" if results["native"]["auto_native"] else "float32 cast"
    print(
        f"22B decoder, {args.frames} x {args.height} x {args.width}, bf16: native / float32-cast time = {ratio:.2f} "
        f"(this CPU picks: {auto}); max |diff| between the two {diff:.3g} (pixels in [-1, 1])"
    )


if __name__ == "__main__":
    main()
