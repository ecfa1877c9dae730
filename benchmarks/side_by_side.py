"""What the `*_vs_reference.py` benchmarks share: fresh child processes per run, ours and the reference's
alternating (who goes first rotates every round), and the table of medians and ratios.

The parent imports no torch: Linux carries a process's peak RSS (ru_maxrss) over fork + exec, so a
child of a parent that had loaded torch would report the parent's peak as its own. Each child prints
one JSON line last: `wall_s`, `cpu_s` (user + system of the process: on a machine shared with other
work it drifts less than wall time) and `peak_rss_mib`, plus anything else it measured.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MEASURES = (("wall_s", "wall s"), ("cpu_s", "CPU s"), ("peak_rss_mib", "peak RSS MiB"))


def load_average() -> str:
    """The 1/5/15-minute load averages (as `uptime` prints them), to judge how shared the machine was."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run_child(python: str, cmd: Sequence[str], threads: int, env: dict[str, str] | None = None) -> dict:
    """Run `python cmd...` with `threads` OpenMP threads; its last stdout line parsed as JSON."""
    full_env = {**os.environ, "OMP_NUM_THREADS": str(threads), **(env or {})}
    # Timings are of the fixed default kernel paths unless a caller asks otherwise (no tuner in the run).
    full_env.setdefault("LTX_KERNEL_TUNING", "0")
    proc = subprocess.run([python, *cmd], capture_output=True, text=True, env=full_env)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reset_peak_rss() -> Callable[[], float]:
    """Reset this process's RSS high-water mark (Linux: /proc/self/clear_refs); returns a function that
    reads the peak since then, in MiB, or NaN where the kernel did not reset it (some sandboxes accept
    the write and keep the old mark: then the mark stays above the current RSS)."""

    def status(field: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return float("nan")

    try:
        Path("/proc/self/clear_refs").write_text("5")
        reset = status("VmHWM:") <= status("VmRSS:") + 1.0
    except OSError:
        reset = False
    return (lambda: status("VmHWM:")) if reset else (lambda: float("nan"))


def check_ref_python(path: str, setup: str) -> None:
    """Refuse a missing reference interpreter before any work, naming how to make one."""
    if not Path(path).is_file():
        raise SystemExit(f"--ref-python {path!r} does not exist; set it up as {setup} describes")


@dataclass
class Rounds:
    """Every run per (case, implementation), filled by `alternate`."""

    runs: dict[tuple[str, str], list[dict]] = field(default_factory=dict)

    def alternate(
        self, case: str, impls: Sequence[str], rounds: int, run: Callable[[str], dict], log: bool = True
    ) -> None:
        """`rounds` rounds of one run per implementation, the first one rotating each round."""
        for r in range(rounds):
            for impl in [*impls[r % len(impls) :], *impls[: r % len(impls)]]:
                result = run(impl)
                self.runs.setdefault((case, impl), []).append(result)
                if log:
                    shown = ", ".join(f"{label} {result[key]:.2f}" for key, label in MEASURES)
                    print(f"  {case} round {r} {impl:<5}: {shown}; load {load_average()}", flush=True)

    def median(self, case: str, impl: str, key: str) -> float:
        return statistics.median(r[key] for r in self.runs[(case, impl)])

    def table(self, ours: str = "ours", ref: str = "ref", measures: Sequence[tuple[str, str]] = MEASURES) -> str:
        """One row per case: each measure's median for both and their ratio (ours / reference)."""
        cases = list(dict.fromkeys(case for case, _ in self.runs))
        head = f"{'case':<10}" + "".join(f"{label + ' (ours / ref = ratio)':>36}" for _, label in measures)
        lines = [head]
        for case in cases:
            if (case, ours) not in self.runs or (case, ref) not in self.runs:
                continue
            row = f"{case:<10}"
            for key, _ in measures:
                a, b = self.median(case, ours, key), self.median(case, ref, key)
                row += f"{f'{a:.2f} / {b:.2f} = {a / b:.2f}':>36}"
            lines.append(row)
        return "\n".join(lines)


def python_for(impl: str, ref_python: str) -> str:
    return ref_python if impl == "ref" else sys.executable


def dump(result: dict) -> None:
    """A child's last line: its measurements as JSON."""
    print(json.dumps(result), flush=True)


def random_weights(module, prefix: str, generator) -> dict:
    """`module`'s tensors (it may sit on the meta device) as random float32 values under `prefix` + name:
    matrices ~ N(0, 1/fan_in) so activations keep their scale through the blocks, norm weights 1, other
    vectors (biases, registers) ~ N(0, 0.02)."""
    import torch

    out = {}
    for name, t in module.state_dict().items():
        if not t.is_floating_point():
            raise ValueError(f"{name}: only floating tensors are expected, got {t.dtype}")
        if t.ndim > 1:
            value = torch.randn(t.shape, generator=generator) * t.shape[-1] ** -0.5
        elif "norm" in name.rsplit(".", 2)[-2]:
            value = torch.ones(t.shape)
        else:
            value = torch.randn(t.shape, generator=generator) * 0.02
        out[prefix + name] = value.contiguous()
    return out
