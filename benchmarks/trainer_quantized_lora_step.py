"""LoRA training step with and without int8 weight quantization (optimum-quanto) of the frozen base.

A 48-block transformer of the LTX-2.3 layout, widened from the demo widths so that the weights dominate
the memory (video 4 x 64, audio 4 x 32 by default), gets peft LoRA adapters (rank 16) on the attention
projections; one setting keeps the base in full precision, the other quantizes it the way the trainer
does (`ltx_trainer.training.quantization.quantize_transformer`). Each setting runs in its own process so
the peak resident set sizes do not mix. Reported per setting: the base model's weight bytes (its state
dict: int8 data plus scales when quantized), the median step time, the process's peak RSS during the
steps (reset after the model is built, Linux; it includes the ~1 GiB of the libraries) and how far the
steps raise the RSS above its level before them (activations, gradients, optimizer state, transient
dequantized weights); then the ratios int8 / full precision.

    uv run python benchmarks/trainer_quantized_lora_step.py
    uv run python benchmarks/trainer_quantized_lora_step.py --dtype bfloat16 --width 512 --threads 2

On the CPU the full-precision base is float32 (as the trainer keeps it there); `--dtype bfloat16` shows
the CUDA setting's ratio of weight memory (bf16 -> int8).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def _reset_peak_rss() -> None:
    """Linux: hand freed heap memory back to the OS (the full-precision weights quantization replaced),
    then reset the process's peak RSS (VmHWM) by writing 5 to clear_refs."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _status_mib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _peak_rss_mib() -> float:
    peak = _status_mib("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mib() -> float:
    return _status_mib("VmRSS") or 0.0


def _one_setting(args: argparse.Namespace) -> dict:
    import torch

    from ltx_core.model.transformer import configure_transformer
    from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
    from ltx_pipelines.demo import DEMO_CONFIG
    from ltx_trainer.config import FlexibleStrategyConfig, ModalityConfig
    from ltx_trainer.training.draws import PerSampleDraws
    from ltx_trainer.training.flexible import FlexibleStrategy, strategy_loss
    from ltx_trainer.training.lora_files import add_lora
    from ltx_trainer.training.quantization import quantize_transformer
    from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    heads, head_dim = 4, args.width // 4
    audio_head_dim = head_dim // 2
    transformer = {
        **DEMO_CONFIG["transformer"],
        "num_layers": args.blocks,
        "num_attention_heads": heads,
        "attention_head_dim": head_dim,
        "cross_attention_dim": args.width,
        "audio_num_attention_heads": heads,
        "audio_attention_head_dim": audio_head_dim,
        "audio_cross_attention_dim": heads * audio_head_dim,
    }
    config = {**DEMO_CONFIG, "transformer": transformer}
    model = configure_transformer(config).to(dtype).requires_grad_(False)
    if args.quantization is not None:
        quantize_transformer(model, args.quantization, torch.device("cpu"), progress=False)
    weight_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    model = add_lora(model, 16, 16, 0.0, ["to_q", "to_k", "to_v", "to_out.0"])
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:
        p.data = p.data.float()  # as the trainer does: adapters train in float32
    model.train()
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)

    strategy = FlexibleStrategy(
        FlexibleStrategyConfig(video=ModalityConfig(latents_dir="latents"), audio=ModalityConfig(latents_dir="audio")),
        ShiftedLogitNormalSampler(),
    )
    b, f, s, t = args.batch, args.frames, args.size, args.audio_steps
    batch = {
        "latents": {"latents": torch.randn(b, 128, f, s, s), "fps": torch.full((b,), 24.0)},
        "audio": {"latents": torch.randn(b, 8, t, 16)},
    }
    contexts = TextContexts(
        video=torch.randn(b, 128, args.width),
        audio=torch.randn(b, 128, heads * audio_head_dim),
        mask=torch.ones(b, 128, dtype=torch.int64),
    )
    gc.collect()
    _reset_peak_rss()  # the steps' peak, not the full-precision build before quantization
    rss_before_steps = _rss_mib()
    times = []
    for step in range(args.steps):
        began = time.perf_counter()
        inputs = strategy.prepare(batch, contexts, PerSampleDraws(0, step, list(range(b))))
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            v, a = model(inputs.video.modality, inputs.audio.modality)
        loss = strategy_loss(inputs, v.float(), a.float()).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - began)
    return {
        "quantization": args.quantization or "none",
        "tokens": f * s * s + t,
        "weight_mib": weight_bytes / 2**20,
        "step_s": statistics.median(times[1:] if len(times) > 1 else times),
        "peak_rss_mib": _peak_rss_mib(),
        "step_extra_mib": _peak_rss_mib() - rss_before_steps,
        "lora_params": sum(p.numel() for p in trainable),
        "loss": float(loss.detach()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=48)
    parser.add_argument("--width", type=int, default=256, help="video width (4 heads); audio is half as wide")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="full-precision base")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--frames", type=int, default=2, help="latent frames")
    parser.add_argument("--size", type=int, default=8, help="latent height = width")
    parser.add_argument("--audio-steps", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (more than free cores slows steps badly)")
    parser.add_argument("--quantization", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_one_setting(args)))
        return
    results = []
    for quantization in (None, "int8-quanto"):
        cmd = [sys.executable, __file__, "--child", *sys.argv[1:]]
        cmd += ["--quantization", quantization] if quantization else []
        # quanto dequantizes each layer's weights into a short-lived buffer on the CPU; with glibc's
        # adaptive mmap threshold those buffers end up in the heap and stay in the RSS after they are
        # freed, so the peak would show the allocator's retention rather than live memory. A fixed
        # threshold returns them at once (CUDA's caching allocator reuses them instead).
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MALLOC_MMAP_THRESHOLD_": "65536"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.blocks} blocks, width {args.width}, base {args.dtype}, batch {args.batch}, "
          f"{results[0]['tokens']} tokens, LoRA rank 16 ({results[0]['lora_params']} params), "
          f"{args.threads} threads")  # fmt: skip
    print(f"{'base weights':<14}{'weights [MiB]':>15}{'step [s]':>10}{'peak RSS [MiB]':>16}"
          f"{'step peak - start [MiB]':>25}{'loss':>10}")  # fmt: skip
    for r in results:
        print(f"{r['quantization']:<14}{r['weight_mib']:>15.1f}{r['step_s']:>10.3f}{r['peak_rss_mib']:>16.1f}"
              f"{r['step_extra_mib']:>25.1f}{r['loss']:>10.4f}")  # fmt: skip
    full, int8 = results
    print(f"int8-quanto / {args.dtype}: weights x{int8['weight_mib'] / full['weight_mib']:.3f}, "
          f"step time x{int8['step_s'] / full['step_s']:.2f}, "
          f"peak RSS x{int8['peak_rss_mib'] / full['peak_rss_mib']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
