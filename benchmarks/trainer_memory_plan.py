"""The training memory plan's estimate against the measured peak RSS of LoRA steps on the CPU.

Each size runs in its own process: the LTX-2.3 22B layout at 1/4 of its widths (as
`trainer_bf16_step.py`), the trainer's LoRA step on the CPU as the trainer runs it (glibc's mmap threshold
fixed, `training.host_memory`; frozen float32 base and text connectors; every sample's contexts computed
before the first step, then the connectors released; LoRA rank 64 on to_q/k/v/out, AdamW, two steps so
the optimizer's moments exist), with or without gradient checkpointing. Printed per size:
`ltx_trainer.training.memory_estimate`'s estimate for device "cpu" and the process's peak RSS, both whole and without
the process itself (the estimate's `CPU_RUNTIME_BYTES` against the RSS measured after the imports), and
their ratio. `--moving-threshold` leaves glibc's threshold as it is (the trainer before).

Measured here (2 threads, shared machine; GiB, estimate / peak RSS, then without the process itself):

    blocks  tokens  ckpt  estimate  peak RSS  ratio   (estimate: start / step)
         2     544   off      1.56      1.63   0.96   1.56 / 1.30
         2     544    on      1.56      1.63   0.96   1.56 / 1.22
         2    1056   off      1.56      1.63   0.96   1.56 / 1.41
         2    1056    on      1.56      1.63   0.96   1.56 / 1.28
         2    2080   off      1.63      1.73   0.94   1.56 / 1.63
         2    2080    on      1.56      1.63   0.96   1.56 / 1.40
         4    1056   off      1.93      1.99   0.97   1.76 / 1.93

At these sizes the float32 connectors (0.47 GiB) at the start are the peak, except at 2080 tokens and at
4 blocks without checkpointing, where the step is (the estimate's `start` and `step`).

Before (glibc's moving threshold, connectors kept, CPU_RUNTIME_BYTES 600 MiB): 0.87-0.90 of the peak RSS
at 544 tokens, 0.78-0.80 at 1056. The part missing grew with the activations (~ tokens^2 between the two
sizes), but no tensor held it: with glibc's mmap threshold fixed (MALLOC_MMAP_THRESHOLD_=131072, then
`mallopt` in the trainer) the same step's peak RSS at 1056 tokens fell from 2.57 to 2.08 GiB. The heaps
kept freed activations that the next step's requests did not fit. That slack had hidden a second error:
the activation terms were fitted to saved tensors counted once per op that saved them, about twice the
distinct storage at these widths; they are now fitted to the distinct storage
(`tests/test_memory_plan.py`). (The CPU SDPA runs its flash kernel in float32 and bf16, with and without
the text mask: no score matrix is allocated, per torch.profiler.)

    uv run python benchmarks/trainer_memory_plan.py
    uv run python benchmarks/trainer_memory_plan.py --sizes 2x16x16 4x16x16 --blocks 2 4 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from lora_step_parts import AUDIO_STEPS, LORA_TARGETS, RANK, TEXT_TOKENS, lora_step


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(blocks: int, frames: int, size: int, checkpointing: bool, threads: int, moving: bool) -> dict:
    import torch
    from trainer_bf16_step import _quarter_config

    import ltx_trainer.training.trainer  # noqa: F401 - the process baseline of a trainer (its libraries)
    from ltx_core.model.transformer import configure_transformer
    from ltx_trainer.training.host_memory import fix_mmap_threshold
    from ltx_trainer.training.lora_files import add_lora
    from ltx_trainer.training.memory_estimate import (
        CPU_RUNTIME_BYTES,
        TrainingSettings,
        TrainingShape,
        estimate_training_memory,
    )

    baseline = _rss_bytes()  # the interpreter and the libraries, before anything of the run exists
    if not moving:
        fix_mmap_threshold()  # as the trainer on the CPU (training/build.py)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = _quarter_config()
    config["transformer"]["num_layers"] = blocks
    settings = TrainingSettings(
        lora_rank=RANK, lora_targets=LORA_TARGETS, mixed_precision="no", gradient_checkpointing=checkpointing
    )
    shape = TrainingShape(video_tokens=frames * size * size, audio_tokens=AUDIO_STEPS, text_tokens=TEXT_TOKENS)
    estimate = estimate_training_memory(config, settings, shape, device="cpu")

    model = configure_transformer(config).requires_grad_(False)
    model.set_gradient_checkpointing(checkpointing)
    model = add_lora(model, RANK, RANK, 0.0, list(LORA_TARGETS))
    lora_step(model, config, frames, size).run(2)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "blocks": blocks,
        "tokens": shape.video_tokens + shape.audio_tokens,
        "checkpointing": checkpointing,
        "estimate": estimate.peak,
        "estimate_runtime": CPU_RUNTIME_BYTES,  # the process itself (the kept contexts are the run's)
        "peak_rss": peak,
        "baseline_rss": baseline,
        "plan": estimate.describe(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["2x16x16", "4x16x16", "8x16x16"], help="latent FxHxW")
    parser.add_argument("--blocks", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--moving-threshold", action="store_true", help="leave glibc's mmap threshold moving")
    parser.add_argument("--child", nargs=4, type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        blocks, frames, size, checkpointing = args.child
        print(json.dumps(child(blocks, frames, size, bool(checkpointing), args.threads, args.moving_threshold)))
        return
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    gib = 2**30
    print(f"{'blocks':>6}{'tokens':>8}{'ckpt':>6}{'estimate':>10}{'peak RSS':>10}{'ratio':>7}"
          f"{'est.-runtime':>14}{'RSS-baseline':>14}{'ratio':>7}   [GiB]")  # fmt: skip
    for blocks in args.blocks:
        for size in args.sizes:
            f, h, w = (int(v) for v in size.split("x"))
            if h != w:
                raise SystemExit(f"--sizes takes square latents FxSxS, got {size}")
            for checkpointing in (0, 1):
                cmd = [sys.executable, __file__, "--child", str(blocks), str(f), str(h), str(checkpointing)]
                cmd += ["--threads", str(args.threads)] + (["--moving-threshold"] if args.moving_threshold else [])
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                run_est, run_rss = r["estimate"] - r["estimate_runtime"], r["peak_rss"] - r["baseline_rss"]
                print(f"{r['blocks']:>6}{r['tokens']:>8}{'on' if r['checkpointing'] else 'off':>6}"
                      f"{r['estimate'] / gib:>10.2f}{r['peak_rss'] / gib:>10.2f}{r['estimate'] / r['peak_rss']:>7.2f}"
                      f"{run_est / gib:>14.2f}{run_rss / gib:>14.2f}{run_est / run_rss:>7.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
