"""SHA-256 of every pipeline's demo outputs, to prove a refactor changed no byte.

Runs each pipeline's `--demo` (both demo families where it runs on both) in its own process with a fixed
seed, prompt and inputs, and prints one line per output file: `<pipeline> <family> <file> <sha256>`.
The sidecar JSON is digested without its timing and version fields, which differ between any two runs.

    uv run python benchmarks/demo_digests.py --inputs /tmp/digest-inputs --write before.txt
    uv run python benchmarks/demo_digests.py --inputs /tmp/digest-inputs --compare before.txt

`--inputs` keeps the conditioning image and clip between the two runs, so that a change in the code that
writes them cannot hide a change in the pipelines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from demo_generations import FAMILIES, SMALL, _cases, _inputs

# Sidecar fields that legitimately differ between two runs of the same inputs.
_VOLATILE = {"elapsed_s", "seconds", "wall_s", "created", "created_at", "timings", "version", "versions", "host"}


def _cases_with_extras(image: Path, clip: Path) -> dict[str, tuple[list[str], str, tuple[str, ...]]]:
    cases = _cases(image, clip)
    cases["distilled_image"] = ([*SMALL, "--image", str(image), "0", "1.0"], ".mp4", FAMILIES)
    cases["distilled_mgpu"] = ([*SMALL, "--num-gpus", "2"], ".mp4", FAMILIES)
    return cases


def _module_of(case: str) -> str:
    return "distilled" if case == "distilled_image" else case


def _stable_json(value: object, work: str) -> object:
    """`value` without the fields that differ between runs, and with the run's own folder named `<work>`."""
    if isinstance(value, dict):
        return {k: _stable_json(v, work) for k, v in sorted(value.items()) if k not in _VOLATILE}
    if isinstance(value, list):
        return [_stable_json(v, work) for v in value]
    if isinstance(value, str):
        return value.replace(work, "<work>")
    return value


def _digest(path: Path, work: Path) -> str:
    if path.suffix == ".json":
        text = json.dumps(_stable_json(json.loads(path.read_text()), str(work)), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=Path, required=True, help="Folder for the shared inputs (made if absent).")
    parser.add_argument("--only", nargs="+", default=None, help="Cases to run (default: all).")
    parser.add_argument("--write", type=Path, default=None, help="Write the digest lines here.")
    parser.add_argument("--compare", type=Path, default=None, help="Compare against a file written by --write.")
    parser.add_argument("--digest-only", type=Path, default=None, help="Digest the outputs of an earlier run's folder.")
    args = parser.parse_args()
    if args.digest_only is not None:
        work = args.digest_only
        for out_dir in sorted(p for p in work.iterdir() if p.is_dir()):
            name, family = out_dir.name.rsplit("-ltx-", 1)
            for path in sorted(f for f in out_dir.rglob("*") if f.is_file()):
                print(f"{name} ltx-{family} {path.relative_to(out_dir)} {_digest(path, work)}")
        return 0

    args.inputs.mkdir(parents=True, exist_ok=True)
    image, clip = args.inputs / "red.png", args.inputs / "clip.mp4"
    if not (image.exists() and clip.exists()):
        image, clip = _inputs(args.inputs)
    work = Path(tempfile.mkdtemp(prefix="ltx-demo-digests-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(args.inputs / "cache"))
    cases = _cases_with_extras(image, clip)
    lines: list[str] = []
    failed = False
    for name in args.only or list(cases):
        extra, suffix, families = cases[name]
        for family in families:
            out_dir = work / f"{name}-{family}"
            out_dir.mkdir()
            output = out_dir / f"out{suffix}"
            command = [
                sys.executable, "-m", f"ltx_pipelines.{_module_of(name)}", "--demo", "--demo-family", family,
                "--prompt", "A red fox trots across a snowy field.", "--seed", "3", "--device", "cpu",
                "--output-path", str(output), "--log-level", "WARNING", *extra,
            ]  # fmt: skip
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                failed = True
                lines.append(f"{name} {family} FAILED rc={done.returncode}")
                print(done.stderr[-2000:], file=sys.stderr)
                continue
            for path in sorted(out_dir.rglob("*")):
                if path.is_file():
                    lines.append(f"{name} {family} {path.relative_to(out_dir)} {_digest(path, work)}")
            print("\n".join(line for line in lines if line.startswith(f"{name} {family} ")), flush=True)
    if args.write:
        args.write.write_text("\n".join(lines) + "\n")
    if args.compare:
        before = set(args.compare.read_text().split("\n")) - {""}
        after = set(lines)
        for line in sorted(before - after):
            print(f"- {line}")
        for line in sorted(after - before):
            print(f"+ {line}")
        same = before == after
        print("identical" if same else "DIFFERENT")
        failed = failed or not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
