"""Wall time and peak memory of `python -m ltx_pipelines.distilled --demo`, cold and warm.

The cold run starts from an empty demo cache (it builds the tiny random model set first); the warm
runs reuse it. Each run is its own process, measured from outside: wall time from start to exit,
peak resident set size from that child's own rusage (os.wait4), so runs do not mix.

    uv run python benchmarks/demo_run.py
    uv run python benchmarks/demo_run.py --warm-runs 3 --threads 1
    uv run python benchmarks/demo_run.py --bytecode-cache   # as an install that keeps .pyc files
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Measurement:
    label: str
    wall_s: float
    peak_rss_mib: float
    returncode: int


def _peak_mib(ru_maxrss: int) -> float:
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    return ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru_maxrss / 1024


def measure(label: str, command: list[str], env: dict[str, str], log: Path) -> Measurement:
    with log.open("ab") as out:
        out.write(f"\n==== {label}: {' '.join(command)}\n".encode())
        out.flush()
        start = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        # wait4 reports this child's own resource usage (RUSAGE_CHILDREN would accumulate all runs).
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
    return Measurement(label, wall, _peak_mib(usage.ru_maxrss), child.returncode)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-runs", type=int, default=1, help="Runs after the cold one (default 1).")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the runs (default: unset).")
    parser.add_argument(
        "--bytecode-cache",
        action="store_true",
        help="Let Python cache compiled bytecode (in a temporary folder), as a normal install does; "
        "without it the environment's PYTHONDONTWRITEBYTECODE setting is kept.",
    )
    parser.add_argument("--keep", action="store_true", help="Keep the temporary cache, outputs and log.")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ltx-demo-bench-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"))
    if args.threads is not None:
        env["OMP_NUM_THREADS"] = str(args.threads)
    if args.bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    log = work / "runs.log"

    def command(output: str) -> list[str]:
        return [
            sys.executable, "-m", "ltx_pipelines.distilled", "--demo",
            "--prompt", "A red fox trots across a snowy field.",
            "--output-path", str(work / output), "--overwrite", "--log-level", "WARNING",
        ]  # fmt: skip

    if args.bytecode_cache:
        # One untimed run with its own demo cache compiles every module the demo imports, as an
        # installed package would have by then; the cold run below still builds its models.
        prime_env = dict(env, XDG_CACHE_HOME=str(work / "prime-cache"))
        with log.open("ab") as out:
            subprocess.run(command("prime.mp4"), env=prime_env, stdout=out, stderr=subprocess.STDOUT, check=True)
    results = [measure("cold (builds the demo models)", command("cold.mp4"), env, log)]
    for i in range(args.warm_runs):
        results.append(measure(f"warm {i + 1}", command(f"warm{i + 1}.mp4"), env, log))

    print(f"python -m ltx_pipelines.distilled --demo  (threads: {args.threads or 'default'}, "
          f"bytecode cache: {'on' if args.bytecode_cache else 'as the environment says'})")  # fmt: skip
    print(f"{'run':34s} {'wall s':>8s} {'peak RSS MiB':>13s}")
    for r in results:
        failed = "" if r.returncode == 0 else f"  FAILED (exit {r.returncode}), see {log}"
        print(f"{r.label:34s} {r.wall_s:8.1f} {r.peak_rss_mib:13.0f}{failed}")
    if args.keep or any(r.returncode for r in results):
        print(f"files kept in {work}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.returncode == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
