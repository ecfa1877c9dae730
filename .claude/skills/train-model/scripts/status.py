"""Print the training status block (format: .claude/skills/train-model/references/status-block.md).

Usage: python .claude/skills/train-model/scripts/status.py RUN [--log LOG] [--outputs DIR]
RUN is the run folder; the log defaults to RUN/logs/train.log, the outputs to RUN/outputs.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The trainer's lines with --disable-progress-bars (ltx_trainer.training.trainer, ltx_trainer.train).
STEP_LINE = re.compile(
    r"^step (?P<step>\d+)/(?P<total>\d+) loss (?P<loss>\S+) lr \S+ step_time (?P<time>[\d.]+)s "
    r"peak_mem (?P<mem>[\d.]+)MB$"
)
SAVED_LINE = re.compile(r"^saved (?P<path>.*_step_(?P<step>\d+)\.safetensors)$")
SAMPLE_LINE = re.compile(r"^validation sample (?P<path>.+)$")
ERROR_LINE = re.compile(r"^error: (?P<message>.+)$")


@dataclass(frozen=True)
class StepLine:
    step: int
    total: int
    loss: float
    step_time: float
    peak_mem_mb: float


@dataclass(frozen=True)
class RunStatus:
    name: str
    state: str
    steps: tuple[StepLine, ...]
    checkpoint: str | None
    sample: str | None
    error: str | None

    def steady_step_time(self) -> float | None:
        """Median step time without the first logged step (it pays for warm-up) and the slowest 10%
        (validation passes). One logged step after the first is enough: with `--log-every 20` a short
        run logs only a handful of lines, and each is a real step's time."""
        times = sorted(s.step_time for s in self.steps[1:])
        times = times[: len(times) - len(times) // 10]
        return statistics.median(times) if times else None

    def loss_drop(self, window: int) -> tuple[float, float] | None:
        """Mean loss of the first and of the last `window` logged steps (None with fewer than 2 x window)."""
        if window < 1 or len(self.steps) < 2 * window:
            return None
        losses = [s.loss for s in self.steps]
        return statistics.fmean(losses[:window]), statistics.fmean(losses[-window:])


def read_status(run: Path, log: Path, outputs: Path) -> RunStatus:
    steps: list[StepLine] = []
    checkpoint = sample = error = None
    final_saved = False
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    for line in lines:
        if m := STEP_LINE.match(line):
            steps.append(StepLine(int(m["step"]), int(m["total"]), float(m["loss"]), float(m["time"]), float(m["mem"])))
            error = None  # training went on after it (a resumed run appends to the log): no longer current
        elif m := SAVED_LINE.match(line):
            checkpoint = Path(m["path"]).name
            final_saved = bool(steps) and int(m["step"]) == steps[-1].total
        elif m := SAMPLE_LINE.match(line):
            sample = Path(m["path"]).name
        elif m := ERROR_LINE.match(line):
            error = m["message"]
    if checkpoint is None:  # a log cut short: fall back to the files themselves
        saved = sorted((outputs / "checkpoints").glob("*_step_*.safetensors"))
        checkpoint = saved[-1].name if saved else None
    state = "running" if _pid_alive(run / "logs" / "train.pid") else "finished" if final_saved else "stopped"
    return RunStatus(run.name, state, tuple(steps), checkpoint, sample, error)


def _pid_alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def format_status(status: RunStatus) -> str:
    last = status.steps[-1] if status.steps else None
    step_time = status.steady_step_time()
    if last is None:
        progress, loss = "0/? (0%)", "none (last 5: none)"
    else:
        progress = f"{last.step}/{last.total} ({100 * last.step // last.total}%)"
        recent = ", ".join(f"{s.loss:.4f}" for s in status.steps[-5:])
        loss = f"{last.loss:.4f} (last 5: {recent})"
    if step_time is None or last is None:
        timing = "measuring | ETA: measuring"
    else:
        timing = f"{step_time:.3f}s | ETA: {_duration((last.total - last.step) * step_time)}"
    peak = f"{max(s.peak_mem_mb for s in status.steps):.1f}MB" if status.steps else "none"
    lines = [
        f"Run: {status.name} ({status.state})",
        f"Step: {progress}",
        f"Loss: {loss}",
        f"Step time: {timing}",
        f"Peak memory: {peak}",
        f"Latest checkpoint: {status.checkpoint or 'none'}",
        f"Latest sample: {status.sample or 'none'}",
    ]
    if status.error and status.state != "running":
        lines.append(f"Error: {status.error}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="status.py", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run folder")
    parser.add_argument("--log", type=Path, default=None, help="trainer log (default RUN/logs/train.log)")
    parser.add_argument("--outputs", type=Path, default=None, help="the run's output_dir (default RUN/outputs)")
    parser.add_argument(
        "--loss-drop",
        type=int,
        default=None,
        metavar="N",
        help="add a line comparing the mean loss of the first and the last N logged steps (the sanity check)",
    )
    args = parser.parse_args(argv)
    if not args.run.is_dir():
        parser.error(f"run folder {str(args.run)!r} does not exist")
    if args.loss_drop is not None and args.loss_drop < 1:
        parser.error(f"--loss-drop {args.loss_drop}: must be at least 1")
    log = args.log or args.run / "logs" / "train.log"
    status = read_status(args.run, log, args.outputs or args.run / "outputs")
    print(format_status(status))
    if args.loss_drop is not None:
        print(format_loss_drop(status, args.loss_drop))
    return 0


def format_loss_drop(status: RunStatus, window: int) -> str:
    means = status.loss_drop(window)
    if means is None:
        return f"Loss drop: needs {2 * window} logged steps, the log has {len(status.steps)} (use --log-every 1)"
    first, last = means
    return f"Loss drop: {first:.4f} -> {last:.4f} ({100 * (first - last) / first:.1f}%, first and last {window} steps)"


if __name__ == "__main__":
    sys.exit(main())
