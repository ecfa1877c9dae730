"""Wall time of `python -m ltx_pipelines.<name> --help` (fresh processes, median of N), and of `import torch`
for scale: the help is built from light modules, so it should not cost an import of torch.

    uv run python benchmarks/cli_help.py
    uv run python benchmarks/cli_help.py --repeats 5 --only distilled dfr
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = (
    "distilled", "ti2vid_one_stage", "ti2vid_two_stages", "ti2vid_two_stages_hq", "t2a_one_stage",
    "a2vid_two_stage", "retake", "keyframe_interpolation", "ic_lora", "lipdub", "dubit", "hdr_ic_lora", "dfr",
    "distilled_mgpu", "decode",
)  # fmt: skip


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="+", default=None)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    torch_s = statistics.median(wall([sys.executable, "-c", "import torch"]) for _ in range(args.repeats))
    print(f"{'import torch':<34}{torch_s:7.2f} s")
    for name in args.only or COMMANDS:
        for extra in ([], ["--demo"]) if name != "decode" else ([],):
            command = [sys.executable, "-m", f"ltx_pipelines.{name}", *extra, "--help"]
            seconds = statistics.median(wall(command) for _ in range(args.repeats))
            label = f"{name} {' '.join(extra)} --help"
            print(f"{label:<34}{seconds:7.2f} s  ({seconds / torch_s:.2f} x import torch)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
