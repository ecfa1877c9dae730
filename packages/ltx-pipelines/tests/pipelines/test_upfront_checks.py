"""Everything checkable is checked before a model is built, and nothing is found after denoising: a diffusers
folder lacking a component, a LoRA whose keys or shapes do not fit the transformer, and final latents holding
NaN (one line, exit 1, no decode command that cannot succeed). Each behaviour: its check in-process, and one
`python -m` run for the exit code and the time to the error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.convert import single_file_to_diffusers
from ltx_core.loader import LoraSpec, read_safetensors_header
from ltx_pipelines import decode, distilled, ti2vid_one_stage
from ltx_pipelines.engine.denoising_stage import FinalLatents
from ltx_pipelines.engine.generation import NonFiniteLatentsError, check_finite_latents

pytestmark = pytest.mark.slow

# An up-front refusal reads headers only; what a refusal found after loading would have logged first.
BUILT_A_MODEL = "INFO ltx_core.loader.builder: built"
TARGET = "transformer_blocks.0.attn1.to_q"


@pytest.fixture(scope="module")
def folder_without_vocoder(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("folder_without_vocoder")
    folder = single_file_to_diffusers(tiny_checkpoint, root / "diffusers")
    shutil.rmtree(folder / "vocoder")
    return folder


def _python_m(module: str, argv: list[str], cache_home: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", module, *argv], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return result, time.monotonic() - start


def _folder_argv(folder: Path, gemma_root: Path, output: Path) -> list[str]:
    return [
        "--checkpoint-path", str(folder), "--gemma-root", str(gemma_root), "--prompt", "a fox",
        "--output-path", str(output), "--height", "64", "--width", "64", "--num-frames", "9", "--device", "cpu",
    ]  # fmt: skip


def test_a_folder_without_vocoder_is_refused_while_the_flags_are_read(
    folder_without_vocoder, tiny_gemma_root, tmp_path, capsys
):
    with pytest.raises(SystemExit) as info:
        ti2vid_one_stage.COMMAND.parse(_folder_argv(folder_without_vocoder, tiny_gemma_root, tmp_path / "o.mp4"))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "needs audio_vae (audio_vae/ + vocoder/ in the diffusers folder)" in err
    assert str(folder_without_vocoder) in err


def test_decode_refuses_a_folder_without_vocoder_before_decoding(folder_without_vocoder, tmp_path, capsys):
    """The decode command a failed run prints must be able to succeed: decode checks the components itself."""
    from ltx_pipelines.engine.generation import RunRecord, save_latents

    latents = tmp_path / "run.latents.safetensors"
    final = _final_latents(folder_without_vocoder, video=torch.zeros(1, 128, 2, 2, 2), audio=torch.zeros(1, 8, 3, 16))
    save_latents(latents, final, RunRecord(prompt="a fox", parameters={}, model_files={}))
    with pytest.raises(SystemExit) as info:
        decode.main(["--latents", str(latents), "--output-path", str(tmp_path / "o.mp4")])
    assert info.value.code == 2
    assert "decoding these latents needs audio_vae" in capsys.readouterr().err


def test_python_m_on_a_folder_without_vocoder_exits_2_in_seconds(
    folder_without_vocoder, tiny_gemma_root, demo_cache_home, tmp_path
):
    output = tmp_path / "fox.mp4"
    result, seconds = _python_m(
        "ltx_pipelines.ti2vid_one_stage", _folder_argv(folder_without_vocoder, tiny_gemma_root, output), demo_cache_home
    )
    assert result.returncode == 2, result.stderr
    assert "needs audio_vae" in result.stderr and "ltx_pipelines.decode" not in result.stderr
    assert BUILT_A_MODEL not in result.stderr, f"a model was built before the refusal ({seconds:.1f} s)"
    assert not any(tmp_path.iterdir())


def _wrong_shape_lora(checkpoint: Path, path: Path) -> Path:
    out_features, in_features = (
        read_safetensors_header(checkpoint).tensors[f"model.diffusion_model.{TARGET}.weight"].shape
    )
    save_file(
        {
            f"diffusion_model.{TARGET}.lora_A.weight": torch.zeros(2, in_features + 3),
            f"diffusion_model.{TARGET}.lora_B.weight": torch.zeros(out_features, 2),
        },
        str(path),
    )
    return path


def test_python_m_with_a_lora_that_does_not_fit_exits_2_in_seconds(tiny_checkpoint, demo_cache_home, tmp_path):
    lora = _wrong_shape_lora(tiny_checkpoint, tmp_path / "wrong-shape.safetensors")
    output = tmp_path / "out" / "fox.mp4"
    output.parent.mkdir()
    argv = ["--demo", "--prompt", "a fox", "--output-path", str(output), "--lora", str(lora)]
    result, seconds = _python_m("ltx_pipelines.distilled", argv, demo_cache_home)
    assert result.returncode == 2, result.stderr
    assert f"--lora: LoRA {str(lora)!r}: delta for '{TARGET}.weight' has shape" in result.stderr
    assert BUILT_A_MODEL not in result.stderr, f"a model was built before the refusal ({seconds:.1f} s)"
    assert not any(output.parent.iterdir())


# ---- final latents holding NaN --------------------------------------------------------------------------------


def _final_latents(checkpoint: Path, *, video: torch.Tensor, audio: torch.Tensor | None) -> FinalLatents:
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.engine.denoising_stage import SeededNoise
    from ltx_pipelines.engine.model_loading import Placement

    return FinalLatents(
        video=video,
        audio=audio,
        shape=VideoPixelShape(batch=1, frames=9, height=64, width=64, fps=24.0),
        checkpoint=checkpoint,
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=SeededNoise(0),
    )


def test_non_finite_final_latents_are_named_with_their_cause(tiny_checkpoint):
    finite = torch.zeros(1, 128, 2, 2, 2)
    check_finite_latents(_final_latents(tiny_checkpoint, video=finite, audio=torch.zeros(1, 8, 3, 16)))
    nan_audio = torch.zeros(1, 8, 3, 16)
    nan_audio[0, 0, 0, 0] = float("nan")
    with pytest.raises(NonFiniteLatentsError, match="final audio latents hold NaN or Inf.*the transformer produced"):
        check_finite_latents(_final_latents(tiny_checkpoint, video=finite, audio=nan_audio))
    inf_video = finite.clone()
    inf_video[0, 0, 0, 0, 0] = float("inf")
    with pytest.raises(
        NonFiniteLatentsError, match=r"final video latents.*LoRA\(s\) 'style.safetensors' at strength 2"
    ):
        check_finite_latents(
            _final_latents(tiny_checkpoint, video=inf_video, audio=None), [LoraSpec("style.safetensors", 2.0)]
        )


def test_a_run_whose_latents_turn_nan_ends_in_one_line_without_a_decode_command(
    tiny_checkpoint, demo_cache_home, write_tiny_lora, tmp_path, monkeypatch, capsys
):
    """A LoRA of finite but huge factors overflows the fused weights: the run denoises to NaN. It ends in one
    line naming the cause, exit 1, and leaves no latents file and no decode command that cannot succeed."""
    lora = write_tiny_lora(tiny_checkpoint, tmp_path / "huge.safetensors", scale=1e20)
    output = tmp_path / "out" / "fox.mp4"
    output.parent.mkdir()
    argv = ["--demo", "--prompt", "a fox", "--output-path", str(output), "--lora", str(lora), "--num-frames", "9"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    assert distilled.main(argv) == 1
    stderr = capsys.readouterr().err
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "latents hold NaN or Inf values: the transformer produced non-finite" in errors[0]
    assert "huge.safetensors" in errors[0] and "ltx_pipelines.decode" not in stderr
    assert not any(output.parent.iterdir())
