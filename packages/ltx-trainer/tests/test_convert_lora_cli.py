"""`python -m ltx_trainer.convert_lora` on bad input and failing writes: one line, the right exit status,
nothing left at the target; `--overwrite` replaces an existing file."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from ltx_trainer import convert_lora

runner = CliRunner()
RUST_FULL_DISK = (
    'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
)


@pytest.fixture
def lora(tmp_path: Path) -> Path:
    path = tmp_path / "lora.safetensors"
    g = torch.Generator().manual_seed(0)
    prefix = "diffusion_model.transformer_blocks.0.attn1.to_q"
    save_file({f"{prefix}.lora_A.weight": torch.randn(4, 32, generator=g),
               f"{prefix}.lora_B.weight": torch.randn(32, 4, generator=g)}, str(path))  # fmt: skip
    return path


def _run(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(convert_lora.app, [str(a) for a in args])
    # An exception other than the exit itself is a traceback on the command line.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output.strip()


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("content", [b"", b"\x93garbage, not a LoRA" * 20], ids=["empty", "garbage"])
def test_an_empty_or_garbage_lora_is_one_line_naming_it(content, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(content)
    code, out = _run(bad, tmp_path / "out.safetensors", "--to", "diffusers")
    assert code == 2 and len(out.splitlines()) == 1 and str(bad) in out and "not a safetensors file" in out, out
    assert _entries(tmp_path) == ["bad.safetensors"]


def test_a_folder_that_is_not_writable_is_one_line(lora, tmp_path, monkeypatch):
    # As root a chmod'ed folder stays writable, so the check's own probe says "not writable".
    real_access = os.access
    monkeypatch.setattr("os.access", lambda p, mode, **k: not mode & os.W_OK and real_access(p, mode, **k))
    code, out = _run(lora, tmp_path / "ro" / "out.safetensors", "--to", "kohya")
    assert code == 2 and len(out.splitlines()) == 1 and "not writable" in out, out


def test_a_read_only_file_system_is_one_line(lora, tmp_path, monkeypatch):
    def read_only(*a, dir=None, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    code, out = _run(lora, tmp_path / "out.safetensors", "--to", "kohya")
    assert code == 1 and len(out.splitlines()) == 1 and "Read-only file system" in out, out
    assert _entries(tmp_path) == ["lora.safetensors"]


@pytest.mark.parametrize(
    "error", [SafetensorError(RUST_FULL_DISK), OSError(errno.ENOSPC, "No space left on device")], ids=["rust", "os"]
)
def test_a_full_disk_is_one_line_and_leaves_nothing(error, lora, tmp_path, monkeypatch):
    def full(tensors, path, metadata=None):
        Path(path).write_bytes(b"half a file")
        raise error

    monkeypatch.setattr(convert_lora, "save_file", full)
    code, out = _run(lora, tmp_path / "out.safetensors", "--to", "diffusers")
    assert code == 1 and len(out.splitlines()) == 1 and "no space left" in out and "out.safetensors" in out, out
    assert _entries(tmp_path) == ["lora.safetensors"]


def test_an_existing_target_is_kept_unless_overwrite(lora, tmp_path):
    target = tmp_path / "taken.safetensors"
    target.write_bytes(b"mine")
    code, out = _run(lora, target, "--to", "kohya")
    assert code == 2 and "--overwrite" in out and target.read_bytes() == b"mine", out
    code, out = _run(lora, target, "--to", "kohya", "--overwrite")
    assert code == 0, out
    assert any(k.startswith("lora_unet_") for k in load_file(str(target)))
    assert _entries(tmp_path) == ["lora.safetensors", "taken.safetensors"]
