"""The generation estimate against the measured peak RSS of demo runs on the CPU, at several sizes.

Each size runs `python -m ltx_pipelines.distilled --demo` in its own process (this script with --child):
the command line is parsed (the memory check runs and `--offload auto` picks), the process's RSS is read
then (imports done, demo models built: what the estimate does not predict), the run is made, and its peak
RSS read from the kernel (ru_maxrss). A sampling thread records the largest RSS seen in each phase (named
after the last model the logs say was built). Printed per size: RSS before the run, the estimated peak
(RSS before + the estimate's host-RAM peak), the measured peak, their ratio, and the phase of each peak.

    uv run python benchmarks/estimate_vs_rss.py
    uv run python benchmarks/estimate_vs_rss.py --sizes 128x192x17 256x384x49
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DEFAULT_SIZES = ("128x192x17", "256x384x49", "384x576x97", "512x768x121")


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class PhaseSampler(logging.Handler):
    """Largest RSS per phase; a phase starts at each 'built <model>' log line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.phase = "start"
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(("built ", "loading Gemma", "released Gemma")):
            self.phase = message.split(" from ")[0].split(" (")[0]

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss = _rss()
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), rss)
            time.sleep(0.01)

    def __enter__(self) -> PhaseSampler:
        logging.getLogger().addHandler(self)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        logging.getLogger().removeHandler(self)


def child(size: str, out: Path) -> None:
    # What the run imports on its own first use, imported now so that the RSS before the run includes it: the
    # memory check runs in a process that has not loaded the pipeline's modules yet.
    import av  # noqa: F401
    import torch
    from transformers import Gemma3ForConditionalGeneration  # noqa: F401

    import ltx_pipelines.engine.generation
    import ltx_pipelines.pipelines.distilled  # noqa: F401
    from ltx_core.generation_memory import estimate_generation
    from ltx_core.offload_auto import transformer_mode_of
    from ltx_core.runtime import RuntimeOptions
    from ltx_pipelines.cli import command
    from ltx_pipelines.distilled import COMMAND

    height, width, frames = (int(v) for v in size.split("x"))
    argv = ["--demo", "--prompt", "A red fox trots across a snowy field.", "--output-path", str(out),
            "--overwrite", "--device", "cpu", "--height", str(height), "--width", str(width),
            "--num-frames", str(frames), "--log-level", "INFO"]  # fmt: skip
    run = COMMAND.parse(argv)
    inputs = command.memory_inputs(run)
    assert inputs is not None, "the memory check did not run"
    sizes, work = inputs
    runtime = run.runtime
    options = runtime.options or RuntimeOptions()
    estimate = estimate_generation(
        sizes, work, transformer_mode=transformer_mode_of(options),
        text_encoder_mode=runtime.text_encoder_mode or "bf16", dtype=runtime.dtype, transformer_options=runtime.options,
    )  # fmt: skip
    torch.set_num_threads(torch.get_num_threads())
    before = _rss()
    with PhaseSampler() as sampler:
        code = COMMAND.run(run)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({
        "size": size, "exit": code, "rss_before": before, "estimate": estimate.host_peak,
        "estimate_phase": max(estimate.phases, key=lambda p: p.device + p.host).name,
        "phases": {p.name: p.device + p.host for p in estimate.phases},
        "peak": peak, "measured_phases": sampler.peaks,
    }))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES), help="HEIGHTxWIDTHxFRAMES")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--verbose", action="store_true", help="print each phase's estimate and measured RSS")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.out)
        return 0
    mib = 2**20
    header = f"{'size':>12s} {'RSS before':>11s} {'estimate':>9s} {'measured':>9s} {'ratio':>6s}"
    print(f"{header}  peak phase (estimated / measured)")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="ltx-estimate-") as work:
        for size in args.sizes:
            result = subprocess.run(
                [sys.executable, __file__, "--child", size, "--out", str(Path(work) / f"{size}.mp4")],
                capture_output=True, text=True, env=dict(os.environ),
            )  # fmt: skip
            lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
            if result.returncode or not lines:
                print(f"{size:>12s} failed (exit {result.returncode}): {result.stderr.strip().splitlines()[-1:]}")
                worst = float("inf")
                continue
            r = json.loads(lines[-1])
            estimated = r["rss_before"] + r["estimate"]
            ratio = estimated / r["peak"]
            worst = max(worst, abs(ratio - 1))
            measured_phase = max(r["measured_phases"], key=r["measured_phases"].get)
            print(f"{size:>12s} {r['rss_before'] / mib:9.0f} M {estimated / mib:7.0f} M {r['peak'] / mib:7.0f} M "
                  f"{ratio:6.3f}  {r['estimate_phase']} / {measured_phase}")  # fmt: skip
            if args.verbose:
                for name, value in r["phases"].items():
                    print(f"{'':>14s} estimate {name:>16s} {(r['rss_before'] + value) / mib:8.0f} M")
                for name, value in r["measured_phases"].items():
                    print(f"{'':>14s} measured {name:>30s} {value / mib:8.0f} M")
    print(f"largest deviation: {worst:.1%}")
    return 0 if worst <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
