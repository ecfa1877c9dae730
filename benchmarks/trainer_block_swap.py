"""Block swap, activation offload and fp8-cast in LoRA training on the CPU: peak RSS and step time against
the unswapped run, and the memory plan's estimate against the measured peak RSS.

A checkpoint of the LTX-2.3 22B layout at 1/4 of its widths (as `trainer_memory_plan.py`) with `--blocks`
blocks is written once (float32, the trainer's CPU dtype without bf16 autocast); each setting then runs
in its own process as the trainer builds it (`training/build.py`: `build_frozen_base` for swap / fp8,
`build_model` otherwise; adapters added over the stand-ins; glibc's mmap threshold fixed; connectors
built in memory and released after the contexts are kept), LoRA rank 64 on to_q/k/v/out, AdamW, two
steps. Printed per setting: the plan's estimate for device "cpu", the peak RSS, their ratio, and the
time of step 2 relative to the unswapped run of the same size.

Measured here (2 threads on a machine shared by several jobs, load average 16-24: step times are noise;
8 blocks of the 1/4-width 22B, 96 tokens = 1x8x8 video + 32 audio, 1024 text tokens, checkpointing on;
GiB):

    setting                 swap  estimate  peak RSS  ratio  losses (steps 1, 2)
    unswapped                  0      2.15      2.02   1.07  6.656815, 6.581939
    swap 3/4 disk              6      1.79      1.66   1.08  6.656815, 6.581939
    swap 3/4 disk, offload     6      1.79      1.67   1.07  6.656815, 6.581939
    swap 3/4 ram               6      2.33      2.24   1.04  6.656815, 6.581939
    fp8-cast                   0      1.61      1.70   0.95  6.678990, 6.585272

Swapping 6 of 8 blocks from the checkpoint file lowers the peak RSS by 0.36 GiB (6 blocks of 0.1 GiB
leave, 2 host buffers come); from RAM it adds the device slots beside the host copies (on the CPU both
are the same memory). The swapped runs' losses equal the unswapped run's. Step time, unswapped and
swapped from disk run alternately as the load fell (8 to 5): 98.7, 44.9, 53.4, 43.9 s, so the swapped
step took 0.82 of the unswapped one's (the block copies are plain memcpy on the CPU; on a GPU they go
over PCIe on a side stream: `benchmarks/gpu/check_22b.py`).

    uv run python benchmarks/trainer_block_swap.py
    uv run python benchmarks/trainer_block_swap.py --blocks 8 --sizes 2x16x16 4x16x16 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from lora_step_parts import AUDIO_STEPS, LORA_TARGETS, RANK, TEXT_TOKENS, lora_step

sys.path.insert(0, str(Path(__file__).parent))

# (name, blocks_to_swap as a share of the blocks, source, checkpointing, offload, quantization)
SETTINGS = (
    ("unswapped", 0.0, "ram", True, False, None),
    ("swap 3/4 disk", 0.75, "disk", True, False, None),
    ("swap 3/4 disk, offload", 0.75, "disk", True, True, None),
    ("swap 3/4 ram", 0.75, "ram", True, False, None),
    ("fp8-cast", 0.0, "ram", True, False, "fp8-cast"),
)


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def write_checkpoint(path: Path, blocks: int) -> dict:
    import torch
    from safetensors.torch import save_file
    from trainer_bf16_step import _quarter_config

    from ltx_core.model.transformer import configure_transformer

    config = _quarter_config()
    config["transformer"]["num_layers"] = blocks
    config = {"transformer": config["transformer"]}
    torch.manual_seed(0)
    model = configure_transformer(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, p.shape[-1] ** -0.5 if p.ndim > 1 else 0.02)
    tensors = {f"model.diffusion_model.{k}": v.contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(path), metadata={"config": json.dumps(config)})
    return config


def child(path: Path, setting: int, frames: int, size: int, threads: int) -> dict:
    import torch

    import ltx_trainer.training.trainer  # noqa: F401 - the process baseline of a trainer (its libraries)
    from ltx_core.loader import build_model, read_checkpoint_config
    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_trainer.training.activation_offload import enable_activation_offload
    from ltx_trainer.training.block_swap import adapter_stand_ins, build_frozen_base
    from ltx_trainer.training.host_memory import fix_mmap_threshold
    from ltx_trainer.training.lora_files import add_lora
    from ltx_trainer.training.memory_estimate import TrainingSettings, TrainingShape, estimate_training_memory

    name, share, source, checkpointing, offload, quantization = SETTINGS[setting]
    baseline = _rss_bytes()
    fix_mmap_threshold()
    torch.set_num_threads(threads)
    config = {"transformer": read_checkpoint_config(path, "transformer")}
    blocks = config["transformer"]["num_layers"]
    swap = round(share * blocks)
    settings = TrainingSettings(
        lora_rank=RANK, lora_targets=LORA_TARGETS, mixed_precision="no", gradient_checkpointing=checkpointing,
        quantization=quantization, blocks_to_swap=swap, swap_source=source, offload_activations=offload,
    )  # fmt: skip
    shape = TrainingShape(video_tokens=frames * size * size, audio_tokens=AUDIO_STEPS, text_tokens=TEXT_TOKENS)
    estimate = estimate_training_memory(config, settings, shape, device="cpu")

    cpu = torch.device("cpu")
    torch.manual_seed(0)
    if swap or quantization:
        model = build_frozen_base(
            AV_TRANSFORMER, path, device=cpu, dtype=torch.float32, blocks_to_swap=swap, swap_source=source,
            quantization=quantization, checkpointing=checkpointing,
        )  # fmt: skip
    else:
        model = build_model(AV_TRANSFORMER, path, dtype=torch.float32, device=cpu)
    model.set_gradient_checkpointing(checkpointing)
    enable_activation_offload(model, offload)
    with adapter_stand_ins(model, torch.float32, cpu):
        model = add_lora(model, RANK, RANK, 0.0, list(LORA_TARGETS))
    times, losses = lora_step(model, config, frames, size).run(2)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "name": name, "blocks": blocks, "swap": swap, "tokens": shape.video_tokens + shape.audio_tokens,
        "estimate": estimate.peak, "peak_rss": peak, "baseline_rss": baseline, "step_s": times[-1],
        "losses": losses, "plan": estimate.describe(),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--sizes", nargs="+", default=["1x8x8", "2x8x8"], help="latent FxHxW (square)")
    parser.add_argument("--settings", nargs="+", type=int, default=list(range(len(SETTINGS))))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, setting, frames, size = args.child
        print(json.dumps(child(Path(path), int(setting), int(frames), int(size), args.threads)))
        return
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    gib = 2**30
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quarter-22b.safetensors"
        write_checkpoint(path, args.blocks)
        print(f"checkpoint: {path.stat().st_size / gib:.2f} GiB, {args.blocks} blocks (float32)")
        print(f"{'setting':<24}{'tokens':>7}{'swap':>5}{'estimate':>10}{'peak RSS':>10}{'ratio':>7}"
              f"{'step s':>8}{'time ratio':>11}  losses  [GiB]")  # fmt: skip
        for size in args.sizes:
            f, h, w = (int(v) for v in size.split("x"))
            if h != w:
                raise SystemExit(f"--sizes takes square latents FxSxS, got {size}")
            base_time = None
            for setting in args.settings:
                cmd = [sys.executable, __file__, "--child", str(path), str(setting), str(f), str(h)]
                cmd += ["--threads", str(args.threads)]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                base_time = r["step_s"] if base_time is None else base_time
                print(f"{r['name']:<24}{r['tokens']:>7}{r['swap']:>5}{r['estimate'] / gib:>10.2f}"
                      f"{r['peak_rss'] / gib:>10.2f}{r['estimate'] / r['peak_rss']:>7.2f}{r['step_s']:>8.2f}"
                      f"{r['step_s'] / base_time:>11.2f}  {', '.join(f'{x:.6f}' for x in r['losses'])}",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
