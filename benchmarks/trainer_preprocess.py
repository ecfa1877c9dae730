"""Throughput of `process_dataset` on synthetic clips with the tiny demo model set, per stage.

Builds N clips (moving square, hard cut, sine tone) at the given size, runs the whole preprocessing
once (cold: everything encoded) and once more (warm: everything skipped), and prints seconds per
sample for each, the ratio, and the process's peak resident memory. Tiny random models, so the
numbers measure the data path (decode, resize, I/O, bookkeeping), not real VAE cost.

    uv run python benchmarks/trainer_preprocess.py
    uv run python benchmarks/trainer_preprocess.py --clips 16 --size 256x160 --frames 49
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from ltx_pipelines.demo import write_demo_checkpoint, write_demo_gemma
from ltx_pipelines.io import write_video
from ltx_trainer.preprocessing.buckets import parse_buckets
from ltx_trainer.preprocessing.plan import PreprocessSettings
from ltx_trainer.preprocessing.run import preprocess_dataset


def _clip(frames: int, height: int, width: int) -> torch.Tensor:
    out = torch.empty((frames, height, width, 3), dtype=torch.uint8)
    for i in range(frames):
        out[i] = torch.tensor((200, 40, 40) if i < frames // 2 else (40, 60, 200), dtype=torch.uint8)
        x = (3 * i) % max(1, width - 16)
        out[i, height // 2 - 8 : height // 2 + 8, x : x + 16] = 255
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--size", default="128x96", help="WxH of the clips and the bucket")
    parser.add_argument("--frames", type=int, default=25)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_demo_checkpoint(root / "ckpt.safetensors")
        write_demo_gemma(root / "gemma")
        data = root / "data"
        t = torch.arange(round(args.frames / 24 * 48000)) / 48000
        tone = (0.3 * torch.sin(2 * torch.pi * 440 * t)).expand(2, -1)
        rows = []
        for i in range(args.clips):
            write_video(
                data / f"c{i}.mp4", _clip(args.frames, height, width), fps=24, audio=tone, audio_sample_rate=48000
            )
            rows.append({"video": f"c{i}.mp4", "caption": f"clip number {i}"})
        (data / "d.json").write_text(json.dumps(rows))
        settings = PreprocessSettings(
            model_path=root / "ckpt.safetensors",
            text_encoder_path=root / "gemma",
            resolution_buckets=tuple(parse_buckets(f"{width}x{height}x{args.frames}")),
            device="cpu",
        )
        start = time.perf_counter()
        cold = preprocess_dataset(data / "d.json", settings)
        cold_s = time.perf_counter() - start
        start = time.perf_counter()
        warm = preprocess_dataset(data / "d.json", settings)
        warm_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    print(f"clips: {args.clips} x {width}x{height}x{args.frames}, torch threads {torch.get_num_threads()}")
    print(f"cold run: {cold_s:.2f} s ({cold_s / args.clips:.3f} s/sample), files written {cold.total_written}")
    print(f"warm run: {warm_s:.2f} s ({warm_s / args.clips:.3f} s/sample), files written {warm.total_written}")
    print(f"cold/warm ratio: {cold_s / max(warm_s, 1e-9):.1f}x")
    print(f"peak RSS: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
