"""Transformer forward with and without the AdaLN timestep dedup (CPU, bf16).

The mid-size model of `transformer_forward.py` (8 blocks, 4096 video + 128 audio tokens), text-to-
video timesteps (one value for every token) and image-to-video timesteps (first latent frame at 0).
Runs alternate between dedup on and off; the fastest of `--repeats` forwards is reported, in process
CPU seconds (summed over threads: less disturbed than wall time by other processes sharing the
cores), with the bytes of the AdaLN modulation tensors each way.

    uv run python benchmarks/adaln_dedup.py
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_forward import CONFIG, _inputs

from ltx_core.model.transformer import ModelVariant, configure_transformer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = configure_transformer({"transformer": CONFIG}, ModelVariant.AUDIO_VIDEO)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "table" in name:
                p.normal_(0, 0.05, generator=g)
    model = model.to(torch.bfloat16).eval().requires_grad_(False)
    video, audio = _inputs(torch.bfloat16, g)
    i2v_steps = video.timesteps.clone()
    i2v_steps[:, :256] = 0.0  # the 16 x 16 tokens of the conditioned first latent frame
    cases = {"t2v": video, "i2v": dataclasses.replace(video, timesteps=i2v_steps)}
    print(f"8-block mid-size transformer, {video.latent.shape[1]} + {audio.latent.shape[1]} tokens, bf16, CPU")
    with torch.inference_mode():
        for case, v in cases.items():
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.repeats):
                for dedup in (True, False):
                    model.dedup_timesteps = dedup
                    start = time.process_time()
                    model(v, audio)
                    times[dedup].append(time.process_time() - start)
            mod_bytes = {}
            for dedup in (True, False):
                model.dedup_timesteps = dedup
                state = model._prepare(v, model.config.video, "")
                mod_bytes[dedup] = state.timestep_mod.numel() * state.timestep_mod.element_size()
            on, off = min(times[True]), min(times[False])
            print(
                f"{case}: dedup {on:.2f} CPU s, per token {off:.2f} CPU s -> ratio {on / off:.3f}; "
                f"video AdaLN modulation {mod_bytes[True] / 2**20:.2f} MiB vs {mod_bytes[False] / 2**20:.1f} MiB"
            )


if __name__ == "__main__":
    main()
