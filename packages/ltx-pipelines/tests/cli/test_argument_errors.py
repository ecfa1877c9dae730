"""Issues 32.3 / 33.12: an argument error is one line naming the value and what is accepted, then a pointer to
`--help`, exit code 2 (argparse's own error printed a 35-line usage block first)."""

from __future__ import annotations

import pytest

from ltx_pipelines import decode, distilled, ti2vid_one_stage


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


def test_a_packed_text_encoder_given_as_gemma_root_names_the_component_flags(capsys, tmp_path):
    """Issue 32.4: phase 9 of the skill rendered LTX-2.5 files with --checkpoint-path/--gemma-root; the refusal
    spoke of a "Gemma 3 folder" only. It now names the flags that take LTX-2.5's files."""
    transformer = tmp_path / "ltx-2.5-22b-dev-transformer-bf16.safetensors"
    packed = tmp_path / "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"
    transformer.write_bytes(b"x")
    packed.write_bytes(b"x")
    argv = ["--checkpoint-path", str(transformer), "--gemma-root", str(packed), "--prompt", "a fox"]
    argv += ["--output-path", str(tmp_path / "fox.mp4")]
    lines = error_lines(capsys, ti2vid_one_stage.COMMAND.parse, argv)
    assert lines[0].startswith(
        f"python -m ltx_pipelines.ti2vid_one_stage: error: --gemma-root {str(packed)!r} is a file"
    )
    for flag in ("--text-encoder-path", "--transformer-path", "--video-vae-path", "--audio-vae-path"):
        assert flag in lines[0], flag
