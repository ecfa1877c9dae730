"""A finished generation is never lost: failures after denoising keep the latents, the decode command
finishes the run with the same frames, a file appearing at the output path does not cost the result,
and an interrupted --overwrite leaves the old video and sidecar as they were.

Runs use the demo's tiny random models (built in a temporary folder) at the demo's size on the CPU.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import torch
from safetensors import safe_open

import ltx_pipelines.engine.generation as decoding
from ltx_core.types import VideoPixelShape
from ltx_pipelines import decode, distilled
from ltx_pipelines.cli.command import DEMO_SIZE
from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.model_loading import Placement

pytestmark = pytest.mark.slow

PROMPT = "A lighthouse on a cliff at dusk, waves crashing below."
SEED = 11


def frames_of(video: Path) -> np.ndarray:
    with av.open(str(video)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def files_in(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def argv(models: Any, output: Path, *extra: str) -> list[str]:
    return [
        "--distilled-checkpoint-path", str(models.checkpoint),
        "--spatial-upsampler-path", str(models.spatial_upsampler),
        "--gemma-root", str(models.gemma_root),
        "--prompt", PROMPT,
        "--seed", str(SEED),
        "--height", str(DEMO_SIZE["height"]),
        "--width", str(DEMO_SIZE["width"]),
        "--num-frames", str(DEMO_SIZE["num_frames"]),
        "--device", "cpu",
        "--dtype", "float32",
        "--output-path", str(output),
        *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def uninterrupted(demo_model_files, tmp_path_factory) -> Path:
    """The video of a run where nothing fails (the reference for the resumed ones)."""
    output = tmp_path_factory.mktemp("uninterrupted") / "clip.mp4"
    assert distilled.main(argv(demo_model_files, output)) == 0
    assert sorted(p.name for p in output.parent.iterdir()) == ["clip.json", "clip.mp4"], "latents were left"
    return output


def _fail_after_first_chunk(real: Any) -> Any:
    def decode_then_fail(*args: Any, **kwargs: Any) -> Iterator[torch.Tensor]:
        for chunk in real(*args, **kwargs):
            yield chunk
            raise RuntimeError("simulated decoder failure")

    return decode_then_fail


def test_a_decode_failure_keeps_the_latents_and_the_resume_command_writes_the_same_video(
    demo_model_files, uninterrupted, tmp_path, monkeypatch, capsys
):
    output = tmp_path / "out" / "clip.mp4"
    with monkeypatch.context() as patch:
        patch.setattr(decoding, "decode_video_frames", _fail_after_first_chunk(decoding.decode_video_frames))
        assert distilled.main(argv(demo_model_files, output)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = last_line(err)
    latents = output.parent / "clip.latents.safetensors"
    assert line.startswith("error: RuntimeError: simulated decoder failure"), line
    assert sorted(p.name for p in output.parent.iterdir()) == [latents.name], "only the latents may remain"

    # The line ends with the command that finishes the run; run it as given.
    command = shlex.split(line.split("finish with ", 1)[1])
    assert command[:3] == ["python", "-m", "ltx_pipelines.decode"]
    assert Path(command[command.index("--latents") + 1]) == latents
    assert Path(command[command.index("--output-path") + 1]) == output
    assert decode.main(command[3:]) == 0

    np.testing.assert_array_equal(frames_of(output), frames_of(uninterrupted))
    assert output.read_bytes() == uninterrupted.read_bytes(), "same frames and audio give the same file"
    resumed, reference = (json.loads(p.with_suffix(".json").read_text()) for p in (output, uninterrupted))
    assert resumed["parameters"].pop("output_path") == str(output)
    reference["parameters"].pop("output_path")  # the two runs wrote to different folders
    for key in ("prompt", "parameters", "video", "audio"):
        assert resumed[key] == reference[key], key
    assert latents.is_file(), "the decode command must not delete its input"


def test_a_timestep_conditioned_decoder_resumes_with_the_runs_decoder_noise(
    demo_model_files, tmp_path, monkeypatch, capsys
):
    # LTX-2 decoders draw noise per tile after denoising; the resumed decode must draw the same.
    import copy
    from types import SimpleNamespace

    from ltx_pipelines.demo import DEMO_CONFIG, write_demo_checkpoint

    config = copy.deepcopy(DEMO_CONFIG)
    config["vae"]["timestep_conditioning"] = True
    write_demo_checkpoint(tmp_path / "noisy-decoder.safetensors", config=config)
    models = SimpleNamespace(
        checkpoint=tmp_path / "noisy-decoder.safetensors",
        spatial_upsampler=demo_model_files.spatial_upsampler,
        gemma_root=demo_model_files.gemma_root,
    )
    reference = tmp_path / "reference" / "clip.mp4"
    assert distilled.main(argv(models, reference)) == 0
    output = tmp_path / "failed" / "clip.mp4"
    with monkeypatch.context() as patch:
        patch.setattr(decoding, "decode_video_frames", _fail_after_first_chunk(decoding.decode_video_frames))
        assert distilled.main(argv(models, output)) == 1
    latents = output.parent / "clip.latents.safetensors"
    assert decode.main(["--latents", str(latents), "--output-path", str(output)]) == 0
    assert output.read_bytes() == reference.read_bytes()


def test_the_latents_file_records_the_run(demo_model_files, tmp_path):
    output = tmp_path / "clip.mp4"
    assert distilled.main(argv(demo_model_files, output, "--save-latents")) == 0
    latents = tmp_path / "clip.latents.safetensors"
    sidecar = json.loads((tmp_path / "clip.json").read_text())
    with safe_open(str(latents), framework="pt") as f:
        metadata = f.metadata()
        video_latent = f.get_tensor("video_latent")
        keys = set(f.keys())
    assert {"video_latent", "audio_latent"} <= keys
    assert json.loads(metadata["parameters"]) == sidecar["parameters"]
    assert json.loads(metadata["model_files"]) == sidecar["model_files"]
    assert metadata["prompt"] == sidecar["prompt"] == PROMPT
    assert json.loads(metadata["video"])["num_frames"] == DEMO_SIZE["num_frames"]
    assert Path(metadata["checkpoint"]) == demo_model_files.checkpoint
    # 128 latent channels; time 8x and space 32x smaller than the video.
    assert tuple(video_latent.shape) == (1, 128, 3, DEMO_SIZE["height"] // 32, DEMO_SIZE["width"] // 32)


def test_an_audio_decode_failure_keeps_the_latents(demo_model_files, tmp_path, monkeypatch, capsys):
    def out_of_memory(*args: Any, **kwargs: Any) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(decoding, "decode_audio_waveform", out_of_memory)
    output = tmp_path / "clip.mp4"
    assert distilled.main(argv(demo_model_files, output)) == 1
    line = last_line(capsys.readouterr().err)
    assert line.startswith("error: out of memory") and "--latents" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.latents.safetensors"]


# ---- the output path, taken or replaced while the run works ------------------------------------------


def _fake_generation(frames: Iterator[torch.Tensor]) -> Generation:
    size = DEMO_SIZE
    return Generation(
        frames=frames,
        num_frames=size["num_frames"],
        height=size["height"],
        width=size["width"],
        frame_rate=24.0,
        audio=torch.zeros(2, 48_000),
        audio_sample_rate=48_000,
        prompt=PROMPT,
    )


def _fake_final(models: Any) -> FinalLatents:
    size = DEMO_SIZE
    return FinalLatents(
        video=torch.zeros(1, 128, 3, size["height"] // 32, size["width"] // 32),
        audio=None,
        shape=VideoPixelShape(1, size["num_frames"], size["height"], size["width"], 24.0),
        checkpoint=models.checkpoint,
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=SeededNoise(0),
        prompt=PROMPT,
    )


def _install(monkeypatch, models: Any, frames: Iterator[torch.Tensor]) -> None:
    """The pipeline returns fake latents and its decode step fake frames (no model runs); validation, saving
    the latents and writing stay real."""
    monkeypatch.setattr(distilled.DistilledPipeline, "generate", lambda self, *a, **k: _fake_final(models))
    monkeypatch.setattr(distilled.DistilledPipeline, "decode", lambda self, final: _fake_generation(frames))


def _chunks(then: Any = None) -> Iterator[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    yield torch.rand(9, DEMO_SIZE["height"], DEMO_SIZE["width"], 3, generator=g)
    if then is not None:
        then()
    yield torch.rand(8, DEMO_SIZE["height"], DEMO_SIZE["width"], 3, generator=g)


def test_an_output_that_appears_mid_run_moves_the_result_to_a_numbered_name(
    demo_model_files, tmp_path, monkeypatch, caplog
):
    output = tmp_path / "clip.mp4"

    def someone_writes_the_output() -> None:
        output.write_bytes(b"another program's video")

    _install(monkeypatch, demo_model_files, _chunks(then=someone_writes_the_output))
    assert distilled.main(argv(demo_model_files, output)) == 0
    assert output.read_bytes() == b"another program's video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip-1.json", "clip-1.mp4", "clip.mp4"]
    assert frames_of(tmp_path / "clip-1.mp4").shape[0] == DEMO_SIZE["num_frames"]
    assert json.loads((tmp_path / "clip-1.json").read_text())["output"] == "clip-1.mp4"
    assert "clip-1.mp4" in caplog.text and "appeared" in caplog.text


def test_an_interrupted_overwrite_leaves_the_old_pair(demo_model_files, tmp_path, monkeypatch, capsys):
    output = tmp_path / "clip.mp4"
    output.write_bytes(b"old video")
    (tmp_path / "clip.json").write_text('{"old": true}')
    before = files_in(tmp_path)

    def interrupt() -> None:
        raise KeyboardInterrupt

    _install(monkeypatch, demo_model_files, _chunks(then=interrupt))
    assert distilled.main(argv(demo_model_files, output, "--overwrite")) == 130
    line = last_line(capsys.readouterr().err)
    latents = tmp_path / "clip.latents.safetensors"
    assert line.startswith("error: interrupted; the denoised latents are saved in"), line
    assert f"--latents {latents}" in line
    assert files_in(tmp_path).keys() == {*before, latents.name}
    assert {name: data for name, data in files_in(tmp_path).items() if name in before} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary files were left"


def test_an_overwrite_replaces_the_pair(demo_model_files, tmp_path, monkeypatch):
    output = tmp_path / "clip.mp4"
    output.write_bytes(b"old video")
    (tmp_path / "clip.json").write_text('{"old": true}')
    _install(monkeypatch, demo_model_files, _chunks())
    assert distilled.main(argv(demo_model_files, output, "--overwrite")) == 0
    assert frames_of(output).shape[0] == DEMO_SIZE["num_frames"]
    assert json.loads((tmp_path / "clip.json").read_text())["output"] == "clip.mp4"


def test_a_run_removes_the_partials_of_a_killed_run(demo_model_files, tmp_path, monkeypatch, caplog):
    import os
    import time

    leftover = tmp_path / ".clip.mp4.k1ll3d00.partial.mp4"
    leftover.write_bytes(b"half of a killed run's video")
    old = time.time() - 3600
    os.utime(leftover, (old, old))
    _install(monkeypatch, demo_model_files, _chunks())
    assert distilled.main(argv(demo_model_files, tmp_path / "clip.mp4")) == 0
    assert not leftover.exists()
    assert str(leftover) in caplog.text


def test_an_output_that_appears_while_denoising_moves_the_finished_run_to_a_numbered_name(
    demo_model_files, tmp_path, monkeypatch, caplog
):
    """The path was free when the flags were read; another program takes it while the run denoises. The
    finished video is not thrown away: it goes to `clip-1.mp4` with its sidecar (issue 22 item 1)."""
    output = tmp_path / "clip.mp4"
    from ltx_pipelines.engine import two_stage_runner

    real = two_stage_runner.run_denoising_stage

    def denoise_while_someone_writes_the_output(*args: Any, **kwargs: Any):
        if not output.exists():
            output.write_bytes(b"another program's video")
        return real(*args, **kwargs)

    monkeypatch.setattr(two_stage_runner, "run_denoising_stage", denoise_while_someone_writes_the_output)
    assert distilled.main(argv(demo_model_files, output)) == 0
    assert output.read_bytes() == b"another program's video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip-1.json", "clip-1.mp4", "clip.mp4"]
    assert frames_of(tmp_path / "clip-1.mp4").shape[0] == DEMO_SIZE["num_frames"]
    assert json.loads((tmp_path / "clip-1.json").read_text())["output"] == "clip-1.mp4"


def test_latents_that_do_not_fit_beside_the_output_are_kept_in_the_temp_folder_and_named(
    demo_model_files, tmp_path, monkeypatch, capsys
):
    """A full disk beside the output (and an encoder failure after it): the latents go to the temp folder and
    the error line names them with the decode command (issue 22 item 5)."""
    import errno
    import tempfile

    from ltx_pipelines.engine import generation

    output, temp = tmp_path / "out" / "clip.mp4", tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    real_save = generation.save_latents

    def disk_full_beside_the_output(path: Any, *args: Any, **kwargs: Any) -> Path:
        if Path(path).parent == output.parent:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_save(path, *args, **kwargs)

    def encoder_fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated encoder failure")

    monkeypatch.setattr(generation, "save_latents", disk_full_beside_the_output)
    monkeypatch.setattr(generation, "encode_video", encoder_fails)
    assert distilled.main(argv(demo_model_files, output)) == 1
    kept = temp / "clip.latents.safetensors"
    line = last_line(capsys.readouterr().err)
    assert f"--latents {kept} --output-path {output}" in line, line
    assert kept.is_file()
