"""Every failure after validation ends in one line on stderr naming the file or value and what to do,
exit code 1 (130 when interrupted), no traceback unless --log-level DEBUG; bad arguments keep exit code 2.

Model files are the demo's tiny random ones (built in a temporary folder), altered per case.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_pipelines import distilled, ti2vid_one_stage, ti2vid_two_stages, ti2vid_two_stages_hq
from ltx_pipelines.cli.command import DEMO_SIZE

MAINS: dict[str, Callable[[list[str] | None], int]] = {
    "distilled": distilled.main,
    "one_stage": ti2vid_one_stage.main,
    "two_stages": ti2vid_two_stages.main,
    "two_stages_hq": ti2vid_two_stages_hq.main,
}


@pytest.fixture
def lora(tmp_path) -> Path:
    """A LoRA file in the released naming (validation reads its header; these runs never fuse it)."""
    path = tmp_path / "lora.safetensors"
    base = "diffusion_model.transformer_blocks.0.attn1.to_q"
    save_file({f"{base}.lora_A.weight": torch.zeros(2, 32), f"{base}.lora_B.weight": torch.zeros(32, 2)}, str(path))
    return path


def argv_for(name: str, models: Any, output: Path, lora: Path | None = None, **overrides: Any) -> list[str]:
    files = {"checkpoint": models.checkpoint, "gemma_root": models.gemma_root, **overrides}
    argv = [
        "--distilled-checkpoint-path" if name == "distilled" else "--checkpoint-path", str(files["checkpoint"]),
        "--gemma-root", str(files["gemma_root"]),
        "--prompt", "a paper boat drifting down a gutter in the rain",
        "--height", str(DEMO_SIZE["height"]), "--width", str(DEMO_SIZE["width"]),
        "--num-frames", str(DEMO_SIZE["num_frames"]),
        "--device", "cpu", "--dtype", "float32",
        "--output-path", str(output),
    ]  # fmt: skip
    if name != "one_stage":
        argv += ["--spatial-upsampler-path", str(models.spatial_upsampler)]
    if name != "distilled":
        # The demo transformer has two blocks; the default STG block (28) is not one of them.
        argv += ["--video-stg-blocks", "1", "--audio-stg-blocks", "1", "--num-inference-steps", "2"]
    if name in ("two_stages", "two_stages_hq"):
        argv += ["--distilled-lora", str(lora)]
    return argv


def error_line(err: str) -> str:
    """The one line the run ended with; fails when there is a traceback or more than one error line."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert err.rstrip().splitlines()[-1] == errors[0], "the error line must be the last one"
    return errors[0]


def raising(error: BaseException) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    return fail


@pytest.mark.parametrize("name", sorted(MAINS))
def test_out_of_memory_in_any_pipeline_is_one_line_and_exit_1(
    name, demo_model_files, lora, tmp_path, monkeypatch, capsys
):
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB (GPU 0; 80 GiB total)\nmore detail")
    monkeypatch.setattr(distilled.DistilledPipeline, "generate", raising(oom))
    for pipeline_class in (
        ti2vid_one_stage.TI2VidOneStagePipeline,
        ti2vid_two_stages.TI2VidTwoStagesPipeline,
        ti2vid_two_stages_hq.TI2VidTwoStagesHQPipeline,
    ):
        monkeypatch.setattr(pipeline_class, "generate", raising(oom))
    code = MAINS[name](argv_for(name, demo_model_files, tmp_path / "out.mp4", lora))
    assert code == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith("error: out of memory (CUDA out of memory. Tried to allocate 40.00 GiB")
    assert "--height" in line and "--dtype bfloat16" in line


def test_a_checkpoint_whose_shapes_do_not_fit_names_the_file(demo_model_files, tmp_path, capsys):
    broken = tmp_path / "broken.safetensors"
    with safe_open(str(demo_model_files.checkpoint), framework="pt") as f:
        metadata = f.metadata()
        tensors = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118 - safe_open is not iterable
    # A transformer weight: every run builds the transformer (a text-only run builds no video encoder).
    prefix = "model.diffusion_model."
    key = next(k for k in sorted(tensors) if k.startswith(prefix) and tensors[k].ndim >= 2)
    tensors[key] = tensors[key][:1].clone()  # one output channel instead of many
    save_file(tensors, str(broken), metadata=metadata)
    code = distilled.main(argv_for("distilled", demo_model_files, tmp_path / "out.mp4", checkpoint=broken))
    assert code == 1
    line = error_line(capsys.readouterr().err)
    assert str(broken) in line and key.removeprefix(prefix) in line, line
    assert "check that each model file is the one its flag expects" in line
    assert not (tmp_path / "out.mp4").exists()


def test_a_gemma_folder_of_another_width_names_both_files(demo_model_files, tmp_path, capsys):
    from ltx_core.text_encoders.gemma import build_tiny_gemma_folder

    wide = build_tiny_gemma_folder(tmp_path / "gemma-wide", hidden_size=32, num_layers=3)
    code = distilled.main(argv_for("distilled", demo_model_files, tmp_path / "out.mp4", gemma_root=wide))
    assert code == 1
    line = error_line(capsys.readouterr().err)
    assert str(wide) in line and str(demo_model_files.checkpoint) in line, line
    assert "32" in line and "--gemma-root" in line


def test_a_truncated_image_names_the_image(demo_model_files, tmp_path, capsys):
    from PIL import Image

    image = tmp_path / "first.png"
    noise = torch.randint(0, 256, (DEMO_SIZE["height"], DEMO_SIZE["width"], 3), dtype=torch.uint8).numpy()
    Image.fromarray(noise).save(image)
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])  # the header survives: validation cannot tell
    argv = [*argv_for("distilled", demo_model_files, tmp_path / "out.mp4"), "--image", str(image), "0", "1.0"]
    assert distilled.main(argv) == 1
    line = error_line(capsys.readouterr().err)
    assert str(image) in line and "truncated" in line, line


def test_disk_full_while_writing_names_the_folder(demo_model_files, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        "ltx_pipelines.engine.generation.encode_video", raising(OSError(errno.ENOSPC, "No space left on device"))
    )
    output = tmp_path / "videos" / "out.mp4"
    assert distilled.main(argv_for("distilled", demo_model_files, output)) == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith("error: no space left on the disk") and str(output.parent) in line, line
    assert "--latents" in line, "the denoised latents are kept (the failure came after denoising)"
    assert sorted(p.name for p in output.parent.iterdir()) == ["out.latents.safetensors"]


def test_debug_log_level_shows_the_traceback_before_the_line(demo_model_files, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(distilled.DistilledPipeline, "generate", raising(ValueError("unexpected value 7")))
    argv = argv_for("distilled", demo_model_files, tmp_path / "out.mp4")
    assert distilled.main(argv) == 1
    line = error_line(capsys.readouterr().err)
    assert line == "error: ValueError: unexpected value 7 (run again with --log-level DEBUG to see where it happened)"
    assert distilled.main([*argv, "--log-level", "DEBUG"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("error: ValueError: unexpected value 7")


def test_bad_arguments_still_exit_2_before_anything_runs(demo_model_files, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(distilled.DistilledPipeline, "generate", raising(AssertionError("must not run")))
    argv = argv_for("distilled", demo_model_files, tmp_path / "out.mp4")
    argv[argv.index("--height") + 1] = "100"
    with pytest.raises(SystemExit) as info:
        distilled.main(argv)
    assert info.value.code == 2
    assert "--height 100" in capsys.readouterr().err


def test_an_incomplete_gemma_folder_is_refused_by_validation(demo_model_files, tmp_path, capsys):
    import shutil

    gemma = tmp_path / "gemma"
    shutil.copytree(demo_model_files.gemma_root, gemma)
    (gemma / "tokenizer_config.json").unlink()
    with pytest.raises(SystemExit) as info:
        distilled.main(argv_for("distilled", demo_model_files, tmp_path / "out.mp4", gemma_root=gemma))
    assert info.value.code == 2
    assert "--gemma-root" in (err := capsys.readouterr().err) and "tokenizer_config.json" in err


def test_the_decode_command_reports_a_file_that_is_not_latents(tmp_path, capsys):
    from ltx_pipelines import decode

    not_latents = tmp_path / "clip.latents.safetensors"
    save_file({"x": torch.zeros(1)}, str(not_latents), metadata={"note": json.dumps("something else")})
    with pytest.raises(SystemExit) as info:
        decode.main(["--latents", str(not_latents), "--output-path", str(tmp_path / "clip.mp4")])
    assert info.value.code == 2
    assert "is not a latents file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device", "/out/clip.mp4"),
        RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos 704 vs 598"),
        Exception("safetensors_rust.SafetensorError: Error while serializing: IoError(Os { kind: StorageFull })"),
    ],
    ids=["oserror", "torch-save", "safetensors"],
)
def test_every_shape_of_a_full_disk_is_the_full_disk_line(error, tmp_path):
    """A full disk reaches the command in the shapes Python, torch.save and safetensors give it; each is the
    one full-disk line (the same recognition the trainer and the converters use)."""
    from ltx_pipelines.cli.command import describe_error

    line = describe_error(error, output_path=tmp_path / "clip.mp4")
    assert line.text.startswith("no space left on the disk"), line
