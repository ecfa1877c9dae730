"""Kernel paths chosen by timing (`ltx_core.tune`) against each fixed path, on this CPU.

Prints the CPU's capability and this machine's decisions (after `python -m ltx_core.tune` on the same
config, so no timing falls inside a measured run), then, each in a fresh process, alternating:

    VAE decode: the 22B decoder (random weights, `ltx-2.3-22b-keys.json`), latent (1, 128, 3, 8, 12)
                -> 17 x 256 x 384 untiled, bf16 and fp32
    transformer forward: 22B widths, 2 blocks, 1024 video + 128 audio tokens, 128 text tokens

with the timed choice ("tuned") and with every path forced (`LTX_KERNEL_PATH`): for bf16 decodes the
native bf16 (direct or time-Winograd convolutions) and the float32-activation ways, for fp32 decodes
each convolution path, for the transformer each SDPA kernel. Wall and CPU seconds, median over
`--repeats`, and each fixed path's time over the tuned one (> 1: the timed choice is faster).

    uv run python benchmarks/kernel_choices.py
    uv run python benchmarks/kernel_choices.py --repeats 2 --only vae
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
_KEYS = _REPO / "tests" / "golden" / "ltx-2.3-22b-keys.json"

SETTINGS = {
    ("vae", "bf16"): {
        "tuned": None,
        "native": "vae-compute=native,conv3d-half=direct",
        "native-time-winograd": "vae-compute=native,conv3d-half=time-winograd",
        "float32": "vae-compute=float32",
    },
    ("vae", "fp32"): {"tuned": None, "direct": "direct", "merged": "merged", "winograd": "winograd"},
    ("transformer", "bf16"): {"tuned": None, "flash": "sdpa=flash", "math": "sdpa=math"},
    ("transformer", "fp32"): {"tuned": None, "flash": "sdpa=flash", "math": "sdpa=math"},
}


def _config() -> dict:
    return json.loads(_KEYS.read_text())["config"]


def _randomized(model, dtype):
    import torch

    model = model.to(dtype).to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("timestep_scale_multiplier"):
                p.fill_(1000.0)
            else:
                p.normal_(0.0, (p[0].numel() if p.ndim > 1 else 1) ** -0.5, generator=g)
        for b in model.buffers():
            b.fill_(1.0)
    return model.eval().requires_grad_(False)


def child(work: str, dtype_name: str, threads: int) -> dict:
    import torch

    from ltx_core.devices import parse_dtype

    torch.set_num_threads(threads)
    dtype = parse_dtype(dtype_name)
    config = _config()
    with torch.device("meta"):
        if work == "vae":
            from ltx_core.model.video_vae import video_decoder_from_config

            model = video_decoder_from_config(config)
        else:
            from ltx_core.model.transformer import configure_transformer

            model = configure_transformer({"transformer": {**config["transformer"], "num_layers": 2}})
    model = _randomized(model, dtype)
    g = torch.Generator().manual_seed(1)
    if work == "vae":
        inputs = (torch.randn(1, 128, 3, 8, 12, generator=g).to(dtype),)
    else:
        sys.path.insert(0, str(_REPO / "benchmarks"))
        inputs = _transformer_inputs(model, dtype, g)
    with torch.inference_mode():
        if work == "transformer":  # first call: oneDNN primitives, the decisions file read
            model(*inputs)
        # (a decode is measured cold, as a user waits for it; its decisions are already in the file)
        began, cpu_began = time.perf_counter(), time.process_time()
        model(*inputs)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _transformer_inputs(model, dtype, g):
    import torch

    from ltx_core.model.transformer import Modality

    f, h, w, audio_tokens, text_tokens = 4, 16, 16, 128, 128
    grid = torch.stack(torch.meshgrid(torch.arange(f), torch.arange(h), torch.arange(w), indexing="ij"), 0)
    starts = grid.reshape(3, -1).float() * torch.tensor([8 / 24, 32, 32])[:, None]
    video_pos = torch.stack([starts, starts + torch.tensor([8 / 24, 32, 32])[:, None]], dim=-1)[None]
    t = torch.arange(audio_tokens, dtype=torch.float32) * 0.04
    audio_pos = torch.stack([t, t + 0.04], dim=-1)[None, None]
    c = model.config
    sigma = torch.tensor([0.8])

    def modality(stream, tokens, positions):
        return Modality(
            latent=torch.randn(1, tokens, stream.in_channels, generator=g).to(dtype),
            timesteps=torch.full((1, tokens, 1), 0.8), sigma=sigma, positions=positions,
            context=torch.randn(1, text_tokens, c.caption_channels or stream.context_dim, generator=g).to(dtype),
        )  # fmt: skip

    return modality(c.video, f * h * w, video_pos), modality(c.audio, audio_tokens, audio_pos)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=["vae", "transformer"], default=None)
    parser.add_argument("--no-tune", action="store_true", help="skip `python -m ltx_core.tune` (decisions made)")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.threads)))
        return
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    env.pop("LTX_KERNEL_PATH", None)
    # Every decision made up front, as `python -m ltx_core.tune` does (its output lists them).
    tune = [sys.executable, "-m", "ltx_core.tune", str(_KEYS), "--untiled", "--video-tokens", "1024",
            "--text-tokens", "128"]  # fmt: skip
    if not args.no_tune:
        print(subprocess.run(tune, env=env, check=True, capture_output=True, text=True).stdout, flush=True)
    print(f"load average before: {os.getloadavg()}")
    results: dict[tuple, list[dict]] = {}
    for _ in range(args.repeats):
        for (work, dtype), paths in SETTINGS.items():
            if args.only and work != args.only:
                continue
            for name, forced in paths.items():
                cmd = [sys.executable, __file__, "--child", work, dtype, "--threads", str(args.threads)]
                run_env = {**env, **({"LTX_KERNEL_PATH": forced} if forced else {})}
                out = subprocess.run(cmd, env=run_env, check=True, capture_output=True, text=True).stdout
                result = json.loads(out.strip().splitlines()[-1])
                results.setdefault((work, dtype, name), []).append(result)
                print(f"{work} {dtype} {name}: {json.dumps(result)}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    header = f"{'work':<12}{'dtype':<6}{'path':<10}{'wall s':>9}{'cpu s':>9}{'RSS MiB':>9}"
    print(header + f"{'path / tuned (wall, cpu)':>28}")
    for (work, dtype, name), rs in results.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        rss = statistics.median(r["peak_rss_mib"] for r in rs)
        tuned = results[(work, dtype, "tuned")]
        ratio_w = wall / statistics.median(r["wall_s"] for r in tuned)
        ratio_c = cpu / statistics.median(r["cpu_s"] for r in tuned)
        print(f"{work:<12}{dtype:<6}{name:<10}{wall:>9.2f}{cpu:>9.2f}{rss:>9.0f}{ratio_w:>18.2f}, {ratio_c:.2f}")


if __name__ == "__main__":
    main()
