"""Peak host memory and wall time of encoding one prompt with Gemma in each text-encoder mode (CPU).

A random Gemma 3 folder (default hidden 1024, 12 layers: ~100M text parameters, the 12B's shape scaled
down) is written once, and a Q8_0 GGUF of it with `python -m ltx_core.convert to-gguf`; each mode then
loads it through `ltx_core.text_encoders.gemma.build_text_encoder` (bf16) and encodes one prompt in its own
process, so ru_maxrss belongs to that run alone. Printed per mode: peak RSS, what it holds above the
process baseline (interpreter, torch, transformers' Gemma modules), and the ratios of both, and of the wall time
(load + encode), to the full load. The machine's load average is printed first: on a shared machine the
times move with it, the memory figures do not.

    uv run python benchmarks/text_encoder_modes.py
    uv run python benchmarks/text_encoder_modes.py --hidden 2048 --layers 16 --tokens 1024
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The parent process stays small (no torch): Linux keeps ru_maxrss across fork + exec, so a child
# forked from a large parent would report the parent's peak as its own.
RUNS = (
    ("full", "folder"),
    ("fp8", "folder"),
    ("stream-ram", "folder"),
    ("stream-disk", "folder"),
    ("full", "gguf"),
    ("stream-disk", "gguf"),
)
PROMPT = "A red fox trots across a snowy field at dawn while the camera tracks it slowly from the left."


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def write_files(root: Path, hidden: int, layers: int) -> None:
    from ltx_core.convert import gemma_folder_to_gguf_file
    from ltx_core.text_encoders.gemma import build_tiny_gemma_folder

    folder = build_tiny_gemma_folder(root / "gemma", hidden_size=hidden, num_layers=layers, num_attention_heads=8)
    gemma_folder_to_gguf_file(folder, root / "gemma-Q8_0.gguf", qtype="Q8_0")


def run_one(root: Path, mode: str, source: str, tokens: int) -> dict:
    import torch

    # transformers' Gemma and tokenizer modules are imported before the baseline: they are not the mode's.
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3ForConditionalGeneration  # noqa: F401

    from ltx_core.text_encoders.gemma import build_text_encoder

    path = root / "gemma" if source == "folder" else root / "gemma-Q8_0.gguf"
    baseline = _peak_rss_mib()
    start = time.perf_counter()
    with build_text_encoder(path, mode, dtype=torch.bfloat16, device="cpu", max_length=tokens) as gemma:
        loaded = time.perf_counter() - start
        gemma.encode([PROMPT])
    return {
        "baseline_mib": baseline,
        "peak_mib": _peak_rss_mib(),
        "load_s": loaded,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=256, help="prompt length after padding (max_length)")
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--write", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write_files(Path(args.write), args.hidden, args.layers)
        return
    if args.child:
        root, mode, source = args.child
        print(json.dumps(run_one(Path(root), mode, source, args.tokens)), flush=True)
        return
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cmd = [sys.executable, __file__, "--write", tmp, "--hidden", str(args.hidden), "--layers", str(args.layers)]
        subprocess.run(cmd, check=True, capture_output=True)
        weights = sum(f.stat().st_size for f in (root / "gemma").glob("*.safetensors")) / 2**20
        gguf = (root / "gemma-Q8_0.gguf").stat().st_size / 2**20
        print(
            f"random Gemma 3, hidden {args.hidden}, {args.layers} layers: folder weights {weights:.0f} MiB (float32), "
            f"Q8_0 GGUF {gguf:.0f} MiB; bf16 on the CPU, one prompt of {args.tokens} tokens"
        )
        results = {}
        for mode, source in RUNS:
            cmd = [sys.executable, __file__, "--child", tmp, mode, source, "--tokens", str(args.tokens)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            results[(mode, source)] = json.loads(out)
    full = results[("full", "folder")]
    full_above = full["peak_mib"] - full["baseline_mib"]
    for (mode, source), r in results.items():
        above = r["peak_mib"] - r["baseline_mib"]
        print(
            f"{mode:>11} {source:>6}: peak RSS {r['peak_mib']:6.0f} MiB "
            f"({r['peak_mib'] / full['peak_mib']:.2f} x full), "
            f"above baseline {above:6.0f} MiB ({above / full_above:.2f} x), load {r['load_s']:5.1f} s, "
            f"load + encode {r['seconds']:5.1f} s ({r['seconds'] / full['seconds']:.2f} x)",
            flush=True,
        )


if __name__ == "__main__":
    main()
