"""Loading time: a diffusers model folder versus the single file it was converted from (CPU).

Writes the demo checkpoint (the tiny model set of `--demo` runs), converts it with
`ltx_core.convert.single_file_to_diffusers`, then builds every component (transformer, text embeddings,
video encoder / decoder, audio encoder / decoder, vocoder) from each source, alternating, `--repeats`
times. Reported: the fastest wall time per source, split into describing the files (`ModelFiles`: headers,
config translation, the diffusers key table) and building the models, and the ratio; also the folder given
as a path (each build resolves it again, as engine calls given a path do). Then the same for the vendored
LTX-2.5 golden split files against `interop/diffusers-ltx-2.5/` (the components it carries exactly).

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
from ltx_pipelines.demo import DEMO_GEMMA_HIDDEN, DEMO_GEMMA_LAYERS, write_demo_checkpoint

SPECS = (
    AV_TRANSFORMER,
    text_embeddings_spec(DEMO_GEMMA_HIDDEN, DEMO_GEMMA_LAYERS + 1),
    VIDEO_ENCODER,
    VIDEO_DECODER,
    AUDIO_ENCODER,
    AUDIO_DECODER,
    VOCODER,
)


def _load(describe, specs) -> tuple[float, float]:
    start = time.perf_counter()
    files = describe()
    described = time.perf_counter()
    for spec in specs:
        build_model(spec, files, dtype=torch.float32, device="cpu")
    return described - start, time.perf_counter() - described


def _race(title: str, sources: dict, specs, repeats: int) -> None:
    best = {name: (float("inf"), float("inf")) for name in sources}
    for _ in range(repeats):
        for name, describe in sources.items():
            times = _load(describe, specs)
            if sum(times) < sum(best[name]):
                best[name] = times
    print(f"{title}, {len(specs)} components, fastest of {repeats}")
    for name, (describe, build) in best.items():
        total = (describe + build) * 1e3
        print(f"  {name:34s} describe {describe * 1e3:7.1f} ms  build {build * 1e3:8.1f} ms  total {total:8.1f} ms")
    names = list(sources)
    reference = sum(best[names[0]])
    for name in names[1:]:
        print(f"  {name} / {names[0]}: {sum(best[name]) / reference:.2f}x")


def _ltx25(repeats: int) -> None:
    """The LTX-2.5 golden split files against the diffusers folder converted from them (vendored fixtures),
    on the components the folder carries exactly."""
    import json

    from ltx_core.model.duration_head import DURATION_HEAD
    from ltx_core.model.video_vae.spec import DIFFUSION_VIDEO_DECODER

    golden = Path(__file__).resolve().parents[1] / "tests" / "golden"
    subset, folder = golden / "ltx-2.5", golden / "interop" / "diffusers-ltx-2.5"
    if not (subset / "manifest.json").is_file() or not folder.is_dir():
        print("LTX-2.5: the vendored golden files are not there; skipped")
        return
    names = json.loads((subset / "manifest.json").read_text())["component_files"]
    parts = ("transformer", "video_vae", "audio_vae", "duration_head")
    specs = (
        AV_TRANSFORMER,
        VIDEO_ENCODER,
        DIFFUSION_VIDEO_DECODER,
        AUDIO_ENCODER,
        AUDIO_DECODER,
        VOCODER,
        DURATION_HEAD,
    )
    sources = {
        "split files": lambda: ModelFiles.split(**{c: subset / names[c] for c in parts}),
        "diffusers folder": lambda: ModelFiles.from_diffusers(folder),
    }
    _race("LTX-2.5 golden files", sources, specs, repeats)


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
            # What an engine call given the folder path does: each build resolves the folder again.
            "diffusers folder (path per build)": lambda: folder,
        }
        _race(f"demo checkpoint ({size / 2**20:.1f} MiB)", sources, SPECS, args.repeats)
    _ltx25(args.repeats)


if __name__ == "__main__":
    main()
