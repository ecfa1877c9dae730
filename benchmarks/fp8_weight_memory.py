"""fp8-cast transformer weight memory vs bfloat16.

1. The released LTX-2.3 22B architecture (config from `ltx-2.3-22b-keys.json`), counted on the meta
   device: bytes of every tensor under each setting (no weights are allocated).
2. Measured: a random 8-block narrow model written as a bf16 checkpoint and built both ways through
   `ltx_core.runtime.build_transformer` in separate processes: bytes held by the module's tensors and
   the process's peak RSS.

    uv run python benchmarks/fp8_weight_memory.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _keys_json() -> Path:
    golden = os.environ.get("LTX_GOLDEN_DIR")
    root = Path(golden) if golden else _HERE.parent / "tests" / "golden"
    return root / "ltx-2.3-22b-keys.json"


def counted_22b() -> None:
    import torch

    from ltx_core.memory_estimate import transformer_weight_bytes
    from ltx_core.runtime import RuntimeOptions

    config = json.loads(_keys_json().read_text())["config"]
    sizes = {}
    for name, options in (("bf16", RuntimeOptions()), ("fp8-cast", RuntimeOptions(quantization="fp8-cast"))):
        non_block, block, blocks = transformer_weight_bytes(config, options, torch.bfloat16)
        sizes[name] = (non_block + blocks * block, block)
    (bf16, bf16_block), (fp8, fp8_block) = sizes["bf16"], sizes["fp8-cast"]
    print(
        f"22B architecture (counted): bf16 {bf16 / 2**30:.2f} GiB, fp8-cast {fp8 / 2**30:.2f} GiB -> ratio "
        f"{fp8 / bf16:.3f} (one block: {fp8_block / bf16_block:.3f})"
    )


def child(path: str, quantization: str) -> None:
    import resource

    import torch

    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_core.runtime import RuntimeOptions, build_transformer

    options = RuntimeOptions(quantization=None if quantization == "bf16" else quantization)
    model = build_transformer(AV_TRANSFORMER, path, options, device="cpu", dtype=torch.bfloat16)
    held = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    print(json.dumps({"held": held, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    counted_22b()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "narrow.safetensors"
        subprocess.run(
            [sys.executable, str(_HERE / "block_streaming_memory.py"), "--write", str(path), "--blocks", "8"],
            check=True,
        )
        results = {}
        for quantization in ("bf16", "fp8-cast"):
            cmd = [sys.executable, __file__, "--child", str(path), quantization]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            results[quantization] = json.loads(out)
        bf16, fp8 = results["bf16"], results["fp8-cast"]
        print(
            f"narrow 8-block model (measured): tensors bf16 {bf16['held'] / 2**20:.1f} MiB, fp8-cast "
            f"{fp8['held'] / 2**20:.1f} MiB -> ratio {fp8['held'] / bf16['held']:.3f}; peak RSS "
            f"{bf16['peak_kib'] / 1024:.0f} vs {fp8['peak_kib'] / 1024:.0f} MiB"
        )


if __name__ == "__main__":
    main()
