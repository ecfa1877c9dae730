"""Step time and peak memory of one LoRA training step on a narrow 48-block transformer (CPU).

The model has the LTX-2.3 layout (48 audio-video blocks) at the demo widths (video 2 x 16, audio
2 x 8), with peft LoRA adapters (rank 16) on every attention projection and the trainer's flexible
strategy and loss. Each setting runs in its own process so the peak resident set sizes do not mix.
Reported per setting: median step time, the peak bytes of activations saved for the backward pass
(counted with autograd's saved-tensor hooks, so exact and independent of the allocator), and the
process's peak RSS.

    uv run python benchmarks/trainer_lora_step.py
    uv run python benchmarks/trainer_lora_step.py --frames 8 --size 12 --audio-steps 64 --steps 4 --threads 2
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


def _one_setting(args: argparse.Namespace) -> dict:
    import torch

    from ltx_core.model.transformer import configure_transformer
    from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
    from ltx_pipelines.demo import DEMO_CONFIG
    from ltx_trainer.config import FlexibleStrategyConfig, ModalityConfig
    from ltx_trainer.training.draws import PerSampleDraws
    from ltx_trainer.training.flexible import FlexibleStrategy, strategy_loss
    from ltx_trainer.training.lora_files import add_lora
    from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = {**DEMO_CONFIG, "transformer": {**DEMO_CONFIG["transformer"], "num_layers": args.blocks}}
    model = configure_transformer(config).requires_grad_(False)
    model.set_gradient_checkpointing(args.checkpointing)
    model = add_lora(model, 16, 16, 0.0, ["to_q", "to_k", "to_v", "to_out.0"])
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)

    strategy = FlexibleStrategy(
        FlexibleStrategyConfig(video=ModalityConfig(latents_dir="latents"), audio=ModalityConfig(latents_dir="audio")),
        ShiftedLogitNormalSampler(),
    )
    b, f, s, t = args.batch, args.frames, args.size, args.audio_steps
    tr = config["transformer"]
    batch = {
        "latents": {"latents": torch.randn(b, 128, f, s, s), "fps": torch.full((b,), 24.0)},
        "audio": {"latents": torch.randn(b, 8, t, 16)},
    }
    video_ctx = tr["num_attention_heads"] * tr["attention_head_dim"]
    audio_ctx = tr["audio_num_attention_heads"] * tr["audio_attention_head_dim"]
    contexts = TextContexts(
        video=torch.randn(b, 128, video_ctx),
        audio=torch.randn(b, 128, audio_ctx),
        mask=torch.ones(b, 128, dtype=torch.int64),
    )

    saved = {"now": 0, "peak": 0}

    def pack(x: torch.Tensor):
        size = x.numel() * x.element_size()
        saved["now"] += size
        saved["peak"] = max(saved["peak"], saved["now"])
        return (x, size)

    def unpack(packed):
        x, size = packed
        saved["now"] -= size
        return x

    times = []
    for step in range(args.steps):
        began = time.perf_counter()
        inputs = strategy.prepare(batch, contexts, PerSampleDraws(0, step, list(range(b))))
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            v, a = model(inputs.video.modality, inputs.audio.modality)
            loss = strategy_loss(inputs, v, a).mean()
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - began)
        saved["now"] = 0
    return {
        "checkpointing": args.checkpointing,
        "tokens": f * s * s + t,
        "step_s": statistics.median(times[1:] if len(times) > 1 else times),
        "saved_activations_mib": saved["peak"] / 2**20,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "lora_params": sum(p.numel() for p in trainable),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=48)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--frames", type=int, default=4, help="latent frames")
    parser.add_argument("--size", type=int, default=8, help="latent height = width")
    parser.add_argument("--audio-steps", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (more than free cores slows steps badly)")
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_one_setting(args)))
        return
    results = []
    for checkpointing in (False, True):
        cmd = [sys.executable, __file__, "--child", *sys.argv[1:]] + (["--checkpointing"] if checkpointing else [])
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.blocks} blocks, batch {args.batch}, {results[0]['tokens']} tokens, LoRA rank 16 "
          f"({results[0]['lora_params']} params), {args.threads} threads")  # fmt: skip
    print(f"{'gradient checkpointing':<24}{'step [s]':>10}{'saved activations [MiB]':>26}{'peak RSS [MiB]':>16}")
    for r in results:
        label = "on" if r["checkpointing"] else "off"
        print(f"{label:<24}{r['step_s']:>10.3f}{r['saved_activations_mib']:>26.1f}{r['peak_rss_mib']:>16.1f}")
    off, on = results
    print(f"checkpointing: time x{on['step_s'] / off['step_s']:.2f}, "
          f"saved activations x{on['saved_activations_mib'] / off['saved_activations_mib']:.3f}, "
          f"peak RSS x{on['peak_rss_mib'] / off['peak_rss_mib']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
