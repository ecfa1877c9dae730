"""`python -m ltx_core.convert` reports an argument error the way every command does: the one line naming the
value, then where the flags are described, exit code 2 (no usage block before the line)."""

from __future__ import annotations

import pytest

from ltx_core import convert


@pytest.mark.parametrize(
    "argv",
    [["frobnicate"], ["to-gguf"], ["to-gguf", "a.safetensors", "b.gguf", "--bogus"]],
    ids=["unknown-command", "missing-arguments", "unknown-flag"],
)
def test_an_argument_error_is_one_line_then_the_help_pointer(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        convert.main(argv)
    assert stop.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert "error:" in lines[0] and not lines[0].startswith("usage:")
    assert lines[1].startswith("run `python -m ltx_core.convert") and "--help" in lines[1]
