"""Issues 32.3 / 33.12: an argument error is one line naming the value and what is accepted, then a pointer to
`--help`, exit code 2 (argparse's own error printed a 35-line usage block first)."""

from __future__ import annotations

import pytest

from ltx_pipelines import decode, distilled


def error_lines(capsys, parse, argv: list[str]) -> list[str]:
    with pytest.raises(SystemExit) as info:
        parse(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.splitlines()


def test_a_value_the_flag_group_refuses_is_one_line(capsys, tmp_path):
    argv = ["--demo", "--prompt", "a fox", "--output-path", str(tmp_path / "fox.mp4"), "--num-frames", "18"]
    lines = error_lines(capsys, distilled.COMMAND.parse, argv)
    assert lines[0].startswith("python -m ltx_pipelines.distilled: error: --num-frames 18 is not accepted"), lines
    assert "8k+1" in lines[0]
    assert lines[1:] == ["run `python -m ltx_pipelines.distilled --help` for the flags"]


def test_an_unknown_flag_is_one_line(capsys, tmp_path):
    lines = error_lines(
        capsys,
        distilled.COMMAND.parse,
        ["--demo", "--prompt", "a", "--output-path", str(tmp_path / "o.mp4"), "--frame-count", "17"],
    )
    assert lines == [
        "python -m ltx_pipelines.distilled: error: unrecognized arguments: --frame-count 17",
        "run `python -m ltx_pipelines.distilled --help` for the flags",
    ]


def test_decode_reports_its_errors_the_same_way(capsys, tmp_path):
    argv = ["--latents", str(tmp_path / "none.latents.safetensors"), "--output-path", str(tmp_path / "o.mp4")]
    lines = error_lines(capsys, decode.main, argv)
    assert lines[0].startswith("python -m ltx_pipelines.decode: error: --latents"), lines
    assert lines[1:] == ["run `python -m ltx_pipelines.decode --help` for the flags"]
