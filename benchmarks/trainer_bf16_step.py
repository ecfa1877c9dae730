"""The trainer's LoRA step under bf16 autocast on the CPU: what the text connectors and the base dtype cost.

The LTX-2.3 22B layout at 1/4 of its widths (video 8 x 128, audio 8 x 64, connectors likewise, 8
connector layers), 2 blocks, LoRA rank 64 on to_q/k/v/out, 512 video + 32 audio tokens, 1024 text
tokens: the step the trainer runs (connectors -> strategy inputs -> forward under autocast -> loss ->
backward -> AdamW), with random weights. Settings, each in its own process, alternated and repeated:

    fp32-before        no autocast, float32 base, connectors every step (the trainer before)
    fp32               no autocast, float32 base, as the trainer now: contexts computed before step 1
                       (`CachedTextContexts.precompute`), then the connectors released; glibc's mmap
                       threshold fixed (`training.host_memory`)
    bf16-before        bf16 autocast, float32 base, float32 connectors every step (the trainer before)
    bf16               bf16 autocast, bf16 base and connectors, otherwise as fp32
    bf16-gc            as bf16, with gradient checkpointing
    bf16-gc-before     as bf16-before, with gradient checkpointing

Printed: median step time (steps after the first; wall and the process's CPU time, which a busy shared
machine disturbs less) and peak RSS per setting, median over repeats.

Side by side with the reference trainer (one weights file loaded by both, the same sample, alternating
fresh processes): `trainer_vs_reference.py`, whose docstring holds the measured table.

    uv run python benchmarks/trainer_bf16_step.py --repeats 2 --steps 4
    uv run python benchmarks/trainer_bf16_step.py --matmul    # bf16 vs float32 Linear on this CPU
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

SETTINGS = ("fp32-before", "fp32", "bf16-before", "bf16", "bf16-gc-before", "bf16-gc")
_KEYS = Path(__file__).resolve().parents[1] / "tests" / "golden" / "ltx-2.3-22b-keys.json"


def _quarter_config() -> dict:
    config = json.loads(_KEYS.read_text())["config"]
    tr = dict(config["transformer"])
    for key in (
        "num_attention_heads",
        "audio_num_attention_heads",
        "connector_num_attention_heads",
        "audio_connector_num_attention_heads",
    ):
        tr[key] //= 4
    tr["cross_attention_dim"] //= 4
    tr["audio_cross_attention_dim"] //= 4
    tr["num_layers"] = 2
    return {"transformer": tr}


def child(setting: str, steps: int, threads: int) -> dict:
    import torch

    from ltx_core.model.transformer import configure_transformer
    from ltx_trainer.config import FlexibleStrategyConfig, ModalityConfig
    from ltx_trainer.training.context_cache import CachedTextContexts
    from ltx_trainer.training.draws import PerSampleDraws
    from ltx_trainer.training.flexible import FlexibleStrategy, strategy_loss
    from ltx_trainer.training.host_memory import fix_mmap_threshold
    from ltx_trainer.training.lora_files import add_lora
    from ltx_trainer.training.text_contexts import text_connectors_spec

    before = setting.endswith("before")
    if not before:
        fix_mmap_threshold()  # as the trainer does on the CPU (training/build.py)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = _quarter_config()
    bf16 = setting.startswith("bf16")
    # The trainer loads the frozen weights straight in their dtype (no float32 copy first): build so.
    torch.set_default_dtype(torch.bfloat16 if bf16 and not before else torch.float32)
    model = configure_transformer(config).requires_grad_(False)
    connectors = text_connectors_spec(True).configurator(config).requires_grad_(False).eval()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for p in [*model.parameters(), *connectors.parameters()]:
            if p.ndim > 1:
                p.normal_(0.0, p.shape[-1] ** -0.5)
    model.set_gradient_checkpointing("-gc" in setting)
    if bf16 and not before:  # the trainer's bf16 LoRA: base and connectors in bf16 (training/build.py)
        model = model.to(torch.bfloat16)
        connectors = connectors.to(torch.bfloat16)
    model = add_lora(model, 64, 64, 0.0, ["to_q", "to_k", "to_v", "to_out.0"])
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler

    strategy = FlexibleStrategy(
        FlexibleStrategyConfig(video=ModalityConfig(latents_dir="v"), audio=ModalityConfig(latents_dir="a")),
        ShiftedLogitNormalSampler(),
    )
    tr = config["transformer"]
    g = torch.Generator().manual_seed(1)
    batch = {
        "v": {"latents": torch.randn(1, 128, 2, 16, 16, generator=g), "fps": torch.full((1,), 24.0)},
        "a": {"latents": torch.randn(1, 8, 32, 16, generator=g)},
    }
    video_features = torch.randn(1, 1024, tr["connector_num_attention_heads"] * tr["connector_attention_head_dim"])
    audio_width = tr["audio_connector_num_attention_heads"] * tr["audio_connector_attention_head_dim"]
    audio_features = torch.randn(1, 1024, audio_width)
    mask = (torch.arange(1024) < 200).long()[None]
    if bf16 and not before:
        video_features, audio_features = video_features.bfloat16(), audio_features.bfloat16()
    cache = CachedTextContexts(connectors)
    if not before:  # the trainer's start: every sample's contexts, then the connectors go
        del connectors
        if not cache.precompute([(0, video_features, audio_features, mask)], 1):
            raise SystemExit("the contexts did not fit the cache")
    times, cpu_times = [], []
    for step in range(steps):
        began, cpu_began = time.perf_counter(), time.process_time()
        if before:
            with torch.no_grad():
                contexts = connectors(video_features, audio_features, mask)
        else:
            contexts = cache(video_features, audio_features, mask, [0])
        inputs = strategy.prepare(batch, contexts, PerSampleDraws(0, step, [0]))
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            v, a = model(inputs.video.modality, inputs.audio.modality)
        loss = strategy_loss(inputs, v, a).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - began)
        cpu_times.append(time.process_time() - cpu_began)
    return {
        "setting": setting,
        "step_s": statistics.median(times[1:] if len(times) > 1 else times),
        "step_cpu_s": statistics.median(cpu_times[1:] if len(cpu_times) > 1 else cpu_times),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def matmul_times(threads: int, repeats: int = 5) -> None:
    """One Linear of the benchmark's widths (544 tokens, 1024 -> 4096) per dtype: is bf16 native here?"""
    import torch

    torch.set_num_threads(threads)
    x, w = torch.randn(544, 1024), torch.randn(4096, 1024)

    def timed(fn) -> float:
        fn()
        began = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - began) / repeats

    fp32 = timed(lambda: torch.nn.functional.linear(x, w))
    bf16 = timed(lambda: torch.nn.functional.linear(x.bfloat16(), w.bfloat16()))
    with torch.autocast("cpu", torch.bfloat16):
        cast32 = timed(lambda: torch.nn.functional.linear(x, w))
        cast16 = timed(lambda: torch.nn.functional.linear(x, w.bfloat16()))
    print(f"linear 544x1024->4096: float32 {fp32 * 1e3:.0f} ms, bf16 {bf16 * 1e3:.0f} ms (x{bf16 / fp32:.1f}); "
          f"bf16 autocast: float32 weight {cast32 * 1e3:.0f} ms, bf16 weight {cast16 * 1e3:.0f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--matmul", action="store_true", help="only time one Linear per dtype (is bf16 native?)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.matmul:
        matmul_times(args.threads)
        return
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.threads)))
        return
    runs: dict[str, list[dict]] = {s: [] for s in args.settings}
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    for _ in range(args.repeats):
        for setting in args.settings:  # alternating fresh processes
            cmd = [sys.executable, __file__, "--child", setting, "--steps", str(args.steps)]
            cmd += ["--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
            runs[setting].append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(runs[setting][-1]), flush=True)
    print(f"{'setting':<16}{'step [s] (median, spread)':>30}{'peak RSS [MiB]':>18}")
    for setting, rs in runs.items():
        t = [r["step_s"] for r in rs]
        m = [r["peak_rss_mib"] for r in rs]
        print(f"{setting:<16}{statistics.median(t):>12.3f} ({min(t):.3f}-{max(t):.3f}){statistics.median(m):>18.0f}")


if __name__ == "__main__":
    main()
