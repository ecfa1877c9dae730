"""What the quick start and the demo say is what the program does: runnable download commands, one demo
warning, the quick start's outputs ignored by git, and README's account of diffusers folders."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ltx_pipelines import distilled

REPO = Path(__file__).resolve().parents[4]
README = REPO / "README.md"


def test_readme_download_commands_run_hf_from_the_venv():
    """`hf` is installed in `.venv` only: a bare `hf download` fails in a fresh shell."""
    lines = [line.strip() for line in README.read_text().splitlines() if "hf download" in line]
    assert lines, "README shows how to download the released weights"
    assert all(line.startswith("uv run hf download") for line in lines), lines


@pytest.mark.parametrize("family", ["ltx-2.3", "ltx-2.5"])
def test_the_demos_download_help_runs_hf_from_the_venv(family):
    from ltx_pipelines.demo.assets import real_weights_help

    text = real_weights_help(distilled.COMMAND.models, family)
    commands = [line.strip() for line in text.splitlines() if "hf download" in line]
    assert commands and all(line.startswith("uv run hf download") for line in commands), commands


def test_readme_says_the_command_lines_take_a_diffusers_folder():
    text = " ".join(README.read_text().split())
    assert "do not take a folder" not in text
    assert "command lines take the folder too" in text and "latent_upsampler/` is the default" in text


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_quick_starts_outputs_are_ignored_by_git():
    quick_start = re.search(r"--output-path (\S+)\.mp4", README.read_text())
    assert quick_start is not None
    stem = quick_start.group(1)
    for name in (f"{stem}.mp4", f"{stem}.json", f"{stem}.latents.safetensors"):
        result = subprocess.run(["git", "check-ignore", "-q", name], cwd=REPO, check=False)
        if result.returncode == 128:
            pytest.skip("not a git checkout")
        assert result.returncode == 0, f"{name} is not ignored"


@pytest.mark.slow
def test_the_demo_warning_is_printed_once(demo_cache_home, monkeypatch, tmp_path, caplog):
    """Reading a --demo command line warns in one line; the download help comes once, with the output."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    with caplog.at_level("WARNING"):
        distilled.COMMAND.parse(["--demo", "--prompt", "a fox", "--output-path", str(tmp_path / "demo.mp4")])
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "random" in warnings[0], warnings
    assert "hf download" not in caplog.text
