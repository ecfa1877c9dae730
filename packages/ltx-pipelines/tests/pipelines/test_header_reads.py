"""Issue 34: a run reads each model file's safetensors header once. The pipeline resolves its model files
into one `ModelFiles` set when it is built; the set keeps every header it reads (`FileHeaders`) and its facts
(`CheckpointInfo`), and every helper given the set answers from it.

Each case runs a `--demo` command in-process, 64x64x9, on demo files built beforehand (building them writes
and reads them: not part of the run), counting every `read_safetensors_header` call by file and by phase:
the command line's checks before the pipeline is built, and the pipeline's own work from its construction on.
"""

from __future__ import annotations

import collections
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

PROMPT = "A red fox runs through fresh snow at dawn"
SIZE = ["--height", "64", "--width", "64", "--num-frames", "9"]

CASES = {
    # id: (command module, demo family, extra flags)
    "distilled-ltx-2.3": ("ltx_pipelines.distilled", "ltx-2.3", []),
    "distilled-ltx-2.5": ("ltx_pipelines.distilled", "ltx-2.5", []),
    "guided-one-stage-ltx-2.3": ("ltx_pipelines.ti2vid_one_stage", "ltx-2.3", ["--num-inference-steps", "2"]),
}


@dataclass
class HeaderReads:
    """Header reads by file name, before the pipeline was built (the command line's checks) and after."""

    command_line: collections.Counter[str] = field(default_factory=collections.Counter)
    pipeline: collections.Counter[str] = field(default_factory=collections.Counter)

    def total(self) -> collections.Counter[str]:
        return self.command_line + self.pipeline


def _count_header_reads(monkeypatch: pytest.MonkeyPatch, reads: HeaderReads) -> None:
    """Every holder of `read_safetensors_header` (its module, and each module that imported it by name) counts."""
    import ltx_core.loader.safetensors_header as safetensors_header
    from ltx_pipelines.engine import prompt_pipeline

    original = safetensors_header.read_safetensors_header
    phase: dict[str, collections.Counter[str]] = {"now": reads.command_line}

    def counting(path: Any) -> Any:
        phase["now"][Path(path).name] += 1
        return original(path)

    for module in list(sys.modules.values()):
        if module is not None and getattr(module, "read_safetensors_header", None) is original:
            monkeypatch.setattr(module, "read_safetensors_header", counting)

    pipeline_init: Callable[..., None] = prompt_pipeline.Pipeline.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        phase["now"] = reads.pipeline
        pipeline_init(self, *args, **kwargs)

    monkeypatch.setattr(prompt_pipeline.Pipeline, "__init__", init)


@pytest.fixture(scope="module", params=sorted(CASES))
def run_reads(
    request: pytest.FixtureRequest,
    demo_cache_home: Path,
    ltx25_demo_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, HeaderReads]]:
    module_name, family, extra = CASES[request.param]
    home = ltx25_demo_home if family == "ltx-2.5" else demo_cache_home
    output = tmp_path_factory.mktemp("header-reads") / "fox.mp4"
    reads = HeaderReads()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(home))
        patch.setenv("LTX_KERNEL_TUNING", "0")
        command = importlib.import_module(module_name)  # imported before counting starts, as its modules
        _count_header_reads(patch, reads)
        argv = ["--demo", "--demo-family", family, "--prompt", PROMPT, "--output-path", str(output)]
        assert command.main([*argv, "--device", "cpu", *SIZE, *extra]) == 0
    yield request.param, reads


def test_the_pipeline_reads_each_model_files_header_once(run_reads: tuple[str, HeaderReads]) -> None:
    case, reads = run_reads
    assert reads.total(), f"{case}: no header read was counted; the counting no longer sees the reader"
    twice = {name: n for name, n in reads.pipeline.items() if n > 1}
    assert not twice, f"{case}: headers read more than once from the pipeline's construction on: {twice}"


def test_the_whole_run_reads_each_model_files_header_once(run_reads: tuple[str, HeaderReads]) -> None:
    case, reads = run_reads
    twice = {name: n for name, n in reads.total().items() if n > 1}
    assert not twice, f"{case}: headers read more than once in the run: {twice}"
