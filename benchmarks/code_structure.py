"""The code-shape figures of issue 34, printed: import circles, long functions, lines per package, the
modules `import ltx_pipelines.distilled` loads, and the files a distilled demo run walks through.

    uv run python benchmarks/code_structure.py            # static figures + the traced demo run
    uv run python benchmarks/code_structure.py --no-trace # static figures only

"Files visited" counts the distinct `ltx_pipelines` files in which a function ran during one demo run
(after the command's own module is imported); "returns" counts how often control came back into a file
of `ltx_pipelines` it had already left, by a call ("calls back") or by any call or function return (a call
into another file and back is one return), which is what a reader following the run has to do.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from import_graph import import_circles, import_graph, package_modules, workspace_packages  # noqa: E402

PACKAGES = workspace_packages(ROOT)
LONG = 60


def _modules() -> dict[str, Path]:
    return package_modules(PACKAGES)


def long_functions() -> list[tuple[int, str]]:
    found = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONG:
                    found.append((length, f"{module}.{node.name}"))
    return sorted(found, reverse=True)


def lines_per_package() -> dict[str, int]:
    return {
        name: sum(len(p.read_text().splitlines()) for p in folder.rglob("*.py"))
        for name, folder in PACKAGES.items()
        if folder.exists()
    }


def imported_by_distilled() -> tuple[int, int]:
    code = "import sys, ltx_pipelines.distilled;print(sum(m.startswith('ltx_') for m in sys.modules), len(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


_TRACER = r"""
import sys, runpy, importlib
from pathlib import Path
mark = "/ltx_pipelines/"
importlib.import_module("ltx_pipelines.distilled")
sequence = []

def owner(frame):
    # Code run while a module is imported (below a second ltx_pipelines `<module>` frame: the first is the
    # command's own, run as __main__) is not part of the run a reader follows.
    found, modules, walk = None, 0, frame
    while walk is not None:
        name = walk.f_code.co_filename
        if mark in name:
            if walk.f_code.co_name == "<module>":
                modules += 1
            elif found is None:
                found = name.split(mark, 1)[1]
        walk = walk.f_back
    return None if modules > 1 else found

def profile(frame, event, arg):
    if event == "call":
        current = owner(frame)
    elif event == "return":
        current = owner(frame.f_back)
    else:
        return
    if current is not None and (not sequence or sequence[-1][1] != current):
        sequence.append((event, current))

sys.argv = ["ltx_pipelines.distilled", *sys.argv[2:]]
sys.setprofile(profile)
try:
    runpy.run_module("ltx_pipelines.distilled", run_name="__main__")
except SystemExit:
    pass
finally:
    sys.setprofile(None)
Path(OUT).write_text("\n".join(f"{e} {f}" for e, f in sequence))
"""


def traced_demo_run(work: Path) -> tuple[list[str], Counter, Counter]:
    out = work / "sequence.txt"
    script = _TRACER.replace("OUT", repr(str(out)))
    command = [
        sys.executable, "-c", script, "--", "--demo", "--prompt", "A red fox.", "--seed", "3", "--device", "cpu",
        "--height", "64", "--width", "64", "--num-frames", "9", "--output-path", str(work / "out.mp4"),
        "--log-level", "WARNING",
    ]  # fmt: skip
    subprocess.run(command, check=True)
    sequence = [line.split(" ", 1) for line in out.read_text().split("\n")]
    seen: set[str] = set()
    returns: Counter = Counter()
    calls_back: Counter = Counter()
    for event, name in sequence:
        if name in seen:
            returns[name] += 1
            if event == "call":
                calls_back[name] += 1
        seen.add(name)
    return sorted(seen), returns, calls_back


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-trace", action="store_true", help="Skip the traced demo run.")
    args = parser.parse_args()

    circles = import_circles(import_graph(_modules()))
    print(f"import circles: {len(circles)}")
    for circle in circles:
        print("  " + " <-> ".join(circle))
    longs = long_functions()
    per_package: dict[str, int] = defaultdict(int)
    for _, name in longs:
        per_package[name.split(".")[0]] += 1
    counts = ", ".join(f"{k} {v}" for k, v in sorted(per_package.items()))
    print(f"functions over {LONG} lines: {len(longs)} ({counts})")
    for length, name in longs:
        print(f"  {length:4d} {name}")
    print("lines per package: " + ", ".join(f"{k} {v}" for k, v in lines_per_package().items()))
    ltx, total = imported_by_distilled()
    print(f"import ltx_pipelines.distilled loads {ltx} ltx_* modules ({total} modules in all)")
    if not args.no_trace:
        with tempfile.TemporaryDirectory() as tmp:
            files, returns, calls_back = traced_demo_run(Path(tmp))
        print(
            f"distilled demo run: {len(files)} ltx_pipelines files visited, {sum(calls_back.values())} calls back"
            f" into a file already left ({sum(returns.values())} counting function returns too)"
        )
        for name, count in calls_back.most_common(8):
            print(f"  {count:4d} {name} ({returns[name]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
