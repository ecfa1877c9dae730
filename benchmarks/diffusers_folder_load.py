"""Loading time: a diffusers model folder versus the single file it was converted from (CPU).

Writes the demo checkpoint (the tiny model set of `--demo` runs), converts it with
`ltx_core.convert.single_file_to_diffusers`, then builds every component (transformer, text embeddings,
video encoder / decoder, audio encoder / decoder, vocoder) from each source, alternating, `--repeats`
times. Reported: the fastest wall time per source, split into describing the files (`ModelFiles`: headers,
config translation, the diffusers key table) and building the models, and the ratio.

    uv run python benchmarks/diffusers_folder_load.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from ltx_core.convert import single_file_to_diffusers
from ltx_core.loader import ModelFiles, build_model
from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.video_vae import VIDEO_DECODER, VIDEO_ENCODER
from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec
from ltx_pipelines.demo_assets import DEMO_GEMMA_HIDDEN, DEMO_GEMMA_LAYERS, write_demo_checkpoint

SPECS = (
    AV_TRANSFORMER,
    text_embeddings_spec(DEMO_GEMMA_HIDDEN, DEMO_GEMMA_LAYERS + 1),
    VIDEO_ENCODER,
    VIDEO_DECODER,
    AUDIO_ENCODER,
    AUDIO_DECODER,
    VOCODER,
)


def _load(describe) -> tuple[float, float]:
    start = time.perf_counter()
    files = describe()
    described = time.perf_counter()
    for spec in SPECS:
        build_model(spec, files, dtype=torch.float32, device="cpu")
    return described - start, time.perf_counter() - described


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "demo.safetensors"
        write_demo_checkpoint(checkpoint)
        folder = single_file_to_diffusers(checkpoint, Path(tmp) / "diffusers")
        size = checkpoint.stat().st_size
        sources = {
            "single file": lambda: ModelFiles.single_file(checkpoint),
            "diffusers folder": lambda: ModelFiles.from_diffusers(folder),
        }
        best = {name: (float("inf"), float("inf")) for name in sources}
        for _ in range(args.repeats):
            for name, describe in sources.items():
                times = _load(describe)
                if sum(times) < sum(best[name]):
                    best[name] = times
    print(f"demo checkpoint, 7 components, fastest of {args.repeats} (checkpoint {size / 2**20:.1f} MiB)")
    for name, (describe, build) in best.items():
        total = (describe + build) * 1e3
        print(f"  {name:17s} describe {describe * 1e3:7.1f} ms  build {build * 1e3:8.1f} ms  total {total:8.1f} ms")
    single, folder_t = sum(best["single file"]), sum(best["diffusers folder"])
    print(f"  diffusers folder / single file: {folder_t / single:.2f}x")


if __name__ == "__main__":
    main()
