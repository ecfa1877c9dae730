"""`python -m ltx_pipelines.<name> --help` prints without importing torch, PyAV, transformers or numpy: the
parser is built from light modules and a pipeline's class is imported only once its flags are checked. Those
imports are what made `--help` take seconds (torch alone: 2-5 s); `benchmarks/cli_help.py` times it."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = (
    "distilled", "ti2vid_one_stage", "ti2vid_two_stages", "ti2vid_two_stages_hq", "t2a_one_stage",
    "a2vid_two_stage", "retake", "keyframe_interpolation", "ic_lora", "lipdub", "dubit", "hdr_ic_lora", "dfr",
    "distilled_mgpu", "ti2vid_two_stages_mgpu", "ti2vid_two_stages_hq_mgpu", "decode",
)  # fmt: skip

HEAVY = ("torch", "av", "transformers", "numpy", "safetensors", "PIL", "cv2", "einops")

# Runs every command's --help in one interpreter with the heavy packages made unimportable: an import of one
# fails with the chain of ltx modules that asked for it.
_PROBE = r"""
import runpy, sys, traceback
heavy = set(sys.argv[1].split(","))
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in heavy:
            stack = traceback.extract_stack()
            chain = [f"{f.filename.rsplit('/src/', 1)[-1]}:{f.lineno}" for f in stack if "ltx_" in f.filename]
            raise ImportError(f"{name} imported via {' <- '.join(reversed(chain))}")
sys.meta_path.insert(0, Refuse())
for command in sys.argv[2:]:
    for extra in ([], ["--demo"], ["--demo", "--demo-family", "ltx-2.5"]) if command != "decode" else ([],):
        sys.argv = [command, *extra, "--help"]
        try:
            runpy.run_module(f"ltx_pipelines.{command}", run_name="__main__")
        except SystemExit as done:
            if done.code not in (0, None):
                print(f"{command} {' '.join(extra)} --help exited {done.code}")
        except ImportError as e:
            print(f"{command} {' '.join(extra)} --help: {e}")
"""


def test_help_of_every_command_imports_no_heavy_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, ",".join(HEAVY), *COMMANDS], capture_output=True, text=True, timeout=120
    )
    problems = [line for line in done.stdout.splitlines() if "--help" in line and not line.startswith(("usage", " "))]
    assert done.returncode == 0, done.stderr[-2000:]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module", ["ltx_pipelines.distilled", "ltx_pipelines.ic_lora", "ltx_pipelines.dfr"])
def test_a_command_module_still_exports_its_pipeline(module: str) -> None:
    """The light command module forwards the pipeline's names, so `from ltx_pipelines.<name> import <Class>`
    (and the package's lazy exports) keep working."""
    import importlib

    command = importlib.import_module(module)
    pipeline = importlib.import_module(module.replace("ltx_pipelines.", "ltx_pipelines.pipelines."))
    name = next(
        n for n in dir(pipeline) if n.endswith("Pipeline") and getattr(pipeline, n).__module__ == pipeline.__name__
    )
    assert getattr(command, name) is getattr(pipeline, name)
