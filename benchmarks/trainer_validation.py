"""Time of one validation run inside training, on the demo checkpoint (CPU).

A LoRA run on the demo checkpoint (all components, `--blocks` transformer blocks) and a tiny
synthetic `.precomputed/` set validates after every step (one 64x64x9 sample, 2 denoising steps);
each validation run is timed from the trainer's call to the validation hook until it returns.
Printed: every run's seconds and their median (the first run also encodes the sample's conditions
and warms the caches, so the median of the later ones is the figure to compare).

    uv run python benchmarks/trainer_validation.py
    uv run python benchmarks/trainer_validation.py --blocks 8 --steps 4 --threads 2

Measured on the shared 2-core CPU machine (load ~10, so noisy), median of runs 2..4, before (a LoRA file
written to the run folder and a second transformer built from the checkpoint for every validation) ->
after (the trained transformer passed to the pipeline): 2 blocks 5.43 s -> 4.08 s (-25%), 8 blocks
6.21 s -> 5.19 s (-16%). Most of a demo validation is building Gemma and the VAEs and decoding; the
saving is the transformer build plus the LoRA write and fusion, which grows with the model (a 22B
transformer is ~44 GB of bf16 weights read and, on a GPU, held twice during validation before).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2, help="transformer blocks of the demo checkpoint")
    parser.add_argument("--steps", type=int, default=4, help="training steps (one validation after each)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch

    from ltx_pipelines.demo import DEMO_CONFIG, write_demo_checkpoint, write_demo_gemma
    from ltx_trainer.config import parse_config
    from ltx_trainer.training import validation
    from ltx_trainer.training.trainer import Trainer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "ltx-trainer" / "tests"))
    from training_data import training_config, write_dataset

    torch.set_num_threads(args.threads)
    times: list[float] = []
    run = validation.ValidationRunner.run

    def timed(self, *a, **k):
        began = time.perf_counter()
        try:
            return run(self, *a, **k)
        finally:
            times.append(time.perf_counter() - began)

    validation.ValidationRunner.run = timed
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = {**DEMO_CONFIG, "transformer": {**DEMO_CONFIG["transformer"], "num_layers": args.blocks}}
        checkpoint = root / "demo.safetensors"
        write_demo_checkpoint(checkpoint, config=config)
        write_demo_gemma(root / "gemma")
        data = write_dataset(root / "data", num_samples=2)
        raw = training_config(
            checkpoint, data, root / "out", optimization={"steps": args.steps},
            validation={"interval": 1, "skip_initial_validation": True, "inference_steps": 2,
                        "video_dims": [64, 64, 9], "samples": [{"prompt": "a red ball"}]},
        )  # fmt: skip
        raw["model"]["text_encoder_path"] = str(root / "gemma")
        began = time.perf_counter()
        Trainer(parse_config(raw), disable_progress_bars=True).train()
        total = time.perf_counter() - began
    print(f"demo checkpoint with {args.blocks} blocks, {args.steps} steps, {args.threads} threads")
    print("validation runs [s]: " + ", ".join(f"{t:.3f}" for t in times))
    later = times[1:] or times
    print(f"median of runs 2..{len(times)}: {statistics.median(later):.3f} s; whole training {total:.1f} s")


if __name__ == "__main__":
    main()
