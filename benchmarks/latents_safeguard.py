"""What keeping a run's result safe costs: saving the final latents before decoding, and publishing
the video + sidecar pair (flushed to disk before each rename), next to writing the same bytes plainly.

The latents are those of a released-size run (121 frames at 1024x1536 -> a (1, 128, 16, 32, 48) video
latent, plus the audio latent of 5 s), in bfloat16 as the pipelines keep them.

    uv run python benchmarks/latents_safeguard.py
    uv run python benchmarks/latents_safeguard.py --frames 241 --height 1088 --width 1920 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
from ltx_pipelines.engine.generation import RunRecord, load_latents, save_latents
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.io.atomic_files import partial_file, publish_with_sidecar


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--height", type=int, default=1024)
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--video-mib", type=float, default=20.0, help="Size of the stand-in encoded video.")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    latent_frames = (args.frames - 1) // 8 + 1
    video = torch.randn(1, 128, latent_frames, args.height // 32, args.width // 32).to(torch.bfloat16)
    audio = torch.randn(1, 8, round(args.frames / 24 * 25), 16).to(torch.bfloat16)
    noise = SeededNoise(0)
    noise("stage_2.video", (4,), device=torch.device("cpu"), dtype=torch.float32)
    final = FinalLatents(
        video=video,
        audio=audio,
        shape=VideoPixelShape(1, args.frames, args.height, args.width, 24.0),
        checkpoint=Path("ltx-2.3-22b-distilled.safetensors"),
        placement=Placement(torch.device("cpu"), torch.bfloat16),
        tiling=None,
        noise=noise,
    )
    record = RunRecord(prompt="a benchmark", parameters={"seed": 0}, model_files={})
    payload = os.urandom(int(args.video_mib * 2**20))

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        latents_path = root / "clip.latents.safetensors"

        def save() -> None:
            save_latents(latents_path, final, record, overwrite=True)

        save_s = _median_s(save, args.repeats)
        latents_mib = latents_path.stat().st_size / 2**20
        load_s = _median_s(lambda: load_latents(latents_path, device=torch.device("cpu")), args.repeats)

        def plain() -> None:
            (root / "plain.mp4").write_bytes(payload)
            (root / "plain.json").write_text("{}")

        def published() -> None:
            with partial_file(root / "clip.mp4") as tmp:
                tmp.write_bytes(payload)
                publish_with_sidecar(tmp, root / "clip.mp4", lambda _: "{}", overwrite=True)

        plain_s = _median_s(plain, args.repeats)
        published_s = _median_s(published, args.repeats)

    print(f"latents of {args.frames} frames at {args.width}x{args.height}: video {tuple(video.shape)} bf16")
    print(f"  latents file: {latents_mib:.1f} MiB, save {save_s * 1e3:.1f} ms, load {load_s * 1e3:.1f} ms")
    print(f"video + sidecar pair ({args.video_mib:.0f} MiB stand-in):")
    print(f"  plain write {plain_s * 1e3:.1f} ms, locked temp + fsync + pair publish {published_s * 1e3:.1f} ms")
    print(f"  ratio published / plain: {published_s / plain_s:.2f}")


if __name__ == "__main__":
    main()
