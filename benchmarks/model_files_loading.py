"""Loading the transformer from a single file vs from its own split file (through `ModelFiles`).

Writes, in a temporary folder, a mid-size random transformer (bf16) twice: inside a single file that
also holds other components' tensors (`vae.*`, `audio_vae.*`, as the released single file does), and
alone in a split transformer file (the LTX-2.5 layout). Then builds the transformer from each through
`build_model(AV_TRANSFORMER, files)`, alternating, and prints the fastest wall time of `--repeats`
and the peak RSS of a fresh child process that builds it once.

    uv run python benchmarks/model_files_loading.py
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_forward import CONFIG

from ltx_core.loader import ModelFiles, build_model
from ltx_core.model.transformer import AV_TRANSFORMER, ModelVariant, configure_transformer


def _write(folder: Path, other_mb: int) -> tuple[Path, Path]:
    config = {"transformer": CONFIG}
    model = configure_transformer(config, ModelVariant.AUDIO_VIDEO)
    tensors = {f"model.diffusion_model.{k}": v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    split = folder / "transformer.safetensors"
    save_file(tensors, str(split), metadata={"config": json.dumps(config)})
    per = other_mb * 2**20 // 2 // 4  # bf16 elements per stand-in tensor, four tensors
    others = {f"{p}.blob{i}": torch.zeros(per, dtype=torch.bfloat16) for p in ("vae", "audio_vae") for i in range(2)}
    single = folder / "single.safetensors"
    save_file({**tensors, **others}, str(single), metadata={"config": json.dumps(config)})
    return single, split


def _files(kind: str, path: Path) -> ModelFiles:
    return ModelFiles.single_file(path) if kind == "single" else ModelFiles.split(transformer=path)


def _peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM; ru_maxrss would include the parent's, kept across exec)."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _peak_rss_child(kind: str, path: str, out: mp.Queue) -> None:
    model = build_model(AV_TRANSFORMER, _files(kind, Path(path)), dtype=torch.bfloat16, device="cpu")
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 2**20
    out.put((_peak_rss_mib(), weights))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--other-mb", type=int, default=256, help="size of the other components in the single file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        single, split = _write(Path(tmp), args.other_mb)
        paths = {"single": single, "split": split}
        best = {k: float("inf") for k in paths}
        for _ in range(args.repeats):
            for kind, path in paths.items():
                start = time.perf_counter()
                build_model(AV_TRANSFORMER, _files(kind, path), dtype=torch.bfloat16, device="cpu")
                best[kind] = min(best[kind], time.perf_counter() - start)
        ctx = mp.get_context("spawn")
        for kind, path in paths.items():
            queue = ctx.Queue()
            child = ctx.Process(target=_peak_rss_child, args=(kind, str(path), queue))
            child.start()
            rss, weights = queue.get()
            child.join()
            size = path.stat().st_size / 2**20
            print(
                f"{kind:>6}: file {size:7.1f} MiB  weights {weights:7.1f} MiB  build {best[kind]:.3f} s  "
                f"child peak RSS {rss:7.1f} MiB"
            )
        print(f"split / single build time: {best['split'] / best['single']:.2f}")


if __name__ == "__main__":
    main()
