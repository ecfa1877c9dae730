"""The released model versions a command declares (`ModelFlags.model_versions`) are what it accepts: a checkpoint
whose `model_version` is another is refused with exit code 2 when its header is read, before anything is built."""

from __future__ import annotations

import pytest

from ltx_pipelines import dfr, distilled


def _argv(checkpoint, model_files, tmp_path) -> list[str]:
    return [
        "--distilled-checkpoint-path", str(checkpoint), "--spatial-upsampler-path", str(model_files.upsampler),
        "--gemma-root", str(model_files.gemma_root), "--prompt", "a fox", "--output-path", str(tmp_path / "o.mp4"),
        "--device", "cpu",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("checkpoint", "an LTX-2.3 model (model_version 2.3.0); this pipeline runs on LTX-2.5 files only"),
        ("checkpoint_v20", "an LTX-2 model (model_version none); this pipeline runs on LTX-2.5 files only"),
    ],
)
def test_dfr_refuses_checkpoints_of_other_model_versions(capsys, model_files, tmp_path, version, message):
    checkpoint = getattr(model_files, version)
    with pytest.raises(SystemExit) as exit_info:
        dfr.COMMAND.parse(_argv(checkpoint, model_files, tmp_path))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--distilled-checkpoint-path {str(checkpoint)!r}: {message}" in err


def test_a_2_4_file_counts_as_2_5(capsys, model_files, tmp_path):
    """LTX-2.4 files carry LTX-2.5's differences: DFR's version check passes them (its keyframe-embedding check,
    which the header-only stand-in lacks, then speaks)."""
    with pytest.raises(SystemExit):
        dfr.COMMAND.parse(_argv(model_files.checkpoint_v24, model_files, tmp_path))
    err = capsys.readouterr().err
    assert "this pipeline runs on" not in err
    assert "use_keyframes_abs_pos_embedding" in err


@pytest.mark.parametrize("version", ["checkpoint", "checkpoint_v20", "checkpoint_v24"])
def test_a_pipeline_of_every_version_takes_each(model_files, tmp_path, version):
    run = distilled.COMMAND.parse(_argv(getattr(model_files, version), model_files, tmp_path))
    assert run.models.choice is not None
