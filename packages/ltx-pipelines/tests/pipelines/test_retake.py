"""Retake: outside the region the latents stay the source's bit for bit (video frames and audio steps),
inside they are regenerated; a modality that is not regenerated is kept whole; the command line writes
a video of the source's shape, repeats with the seed, and refuses bad sources and regions (exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines import retake
from ltx_pipelines.engine.denoising_stage import SeededNoise
from ltx_pipelines.engine.requests import GuidanceRequest
from ltx_pipelines.io import write_video
from ltx_pipelines.retake import RetakePipeline, RetakeRegion, RetakeSource


def write_source(path: Path, *, frames: int = 17, height: int = 64, width: int = 64, fps: float = 24.0,
                 audio: bool = True) -> Path:  # fmt: skip
    g = torch.Generator().manual_seed(0)
    t = torch.linspace(0, 1, frames)[:, None, None, None]
    pixels = (0.5 + 0.4 * torch.sin(6 * t + torch.rand(1, height, width, 3, generator=g) * 3)).clamp(0, 1)
    rate = 48000
    n = round(frames / fps * rate)
    wave = 0.3 * torch.sin(2 * torch.pi * torch.arange(n) / rate * torch.tensor([[330.0], [495.0]]))
    write_video(path, pixels, fps=fps, audio=wave if audio else None, audio_sample_rate=rate if audio else None)
    return path


def _contexts(seed: int) -> TextContexts:
    g = torch.Generator().manual_seed(seed)
    return TextContexts(torch.randn(1, 128, 32, generator=g), torch.randn(1, 128, 16, generator=g),
                        torch.ones(1, 128, dtype=torch.int64))  # fmt: skip


def _overlaps(tools, start: float, end: float) -> list[bool]:
    time = tools.positions("cpu")[0, 0]  # (tokens, 2) seconds
    inside = ((time[:, 1] > start) & (time[:, 0] < end)).tolist()
    if isinstance(tools, VideoLatentTools):  # one flag per latent frame
        per_frame = tools.target_shape.height * tools.target_shape.width
        return inside[::per_frame]
    return inside


@pytest.mark.parametrize(("distilled", "regenerate_video"), [(True, True), (False, True), (True, False)])
def test_outside_the_region_the_latents_are_the_sources(tmp_path, tiny_checkpoint, distilled, regenerate_video):
    source = RetakeSource.from_file(write_source(tmp_path / "src.mp4"))
    pipeline = RetakePipeline(tiny_checkpoint, None, distilled=distilled, device="cpu", dtype=torch.float32,
                              progress=False)  # fmt: skip
    guided = (
        {} if distilled else {"negative_contexts": _contexts(1), "guidance": GuidanceRequest(num_inference_steps=2)}
    )
    start, end = 0.1, 0.3
    generation = pipeline.generate_from_contexts(
        _contexts(0), source=source, region=RetakeRegion(start, end, regenerate_video=regenerate_video),
        noise=SeededNoise(3), **guided,
    )  # fmt: skip
    latents = generation.latents
    for modality, tools in (("video", VideoLatentTools.from_pixel_shape(source.shape)),
                            ("audio", AudioLatentTools.from_video(source.shape))):  # fmt: skip
        got, src = latents[f"stage_1.{modality}_latent"], latents[f"source_{modality}_latent"]
        overlap = _overlaps(tools, start, end)
        assert any(overlap) and not all(overlap)  # the region covers some steps, not all
        kept_whole = modality == "video" and not regenerate_video
        regenerated = [inside and not kept_whole for inside in overlap]
        for i, inside in enumerate(regenerated):
            same = torch.equal(got[:, :, i], src[:, :, i])
            assert same != inside, f"{modality} step {i}: {'changed' if not same else 'kept'} but inside={inside}"
    assert torch.cat(list(generation.frames)).shape == (17, 64, 64, 3)


def _streams(path: Path) -> dict:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        fps = float(video.average_rate or video.guessed_rate)
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video)]
        has_audio = bool(container.streams.audio)
    return {"frames": len(frames), "size": frames[0].shape[:2], "fps": fps, "audio": has_audio}


def test_cli_writes_the_sources_shape_and_repeats_with_the_seed(tmp_path, monkeypatch, demo_cache_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    source = write_source(tmp_path / "src.mp4", width=96)
    outs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.mp4"
        argv = ["--demo", "--prompt", "a door slams", "--output-path", str(out), "--video-path", str(source),
                "--start-time", "0.1", "--end-time", "0.3", "--seed", "7"]  # fmt: skip
        assert retake.main(argv) == 0
        outs.append(out)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    got = _streams(outs[0])
    assert got == {"frames": 17, "size": (64, 96), "fps": 24.0, "audio": True}
    params = json.loads(outs[0].with_suffix(".json").read_text())["parameters"]
    for flag in ("video_path", "start_time", "end_time", "regenerate_video", "regenerate_audio", "seed",
                 "distilled_checkpoint_path", "lora", "max_batch_size", "tile_size"):  # fmt: skip
        assert flag in params, flag


@pytest.mark.parametrize(
    ("case", "extra", "fragments"),
    [
        ("missing", [], ["--video-path", "no such file"]),
        ("not_media", [], ["--video-path", "FFmpeg"]),
        ("frames", [], ["16 frames", "use 9 or 17"]),
        ("size", [], ["width 80", "use 64 or 96"]),
        ("good", ["--start-time", "0.3", "--end-time", "0.1"], ["--end-time 0.1", "after --start-time 0.3"]),
        ("good", ["--start-time", "-0.5"], ["--start-time -0.5", ">= 0"]),
        ("good", ["--start-time", "2", "--end-time", "3"], ["--start-time 2.0", "lasts only"]),
        ("good", ["--no-regenerate-video", "--no-regenerate-audio"], ["nothing to retake"]),
    ],
)
def test_bad_sources_and_regions_exit_2_before_anything_loads(tmp_path, capsys, case, extra, fragments):
    path = {
        "missing": tmp_path / "nope.mp4",
        "not_media": tmp_path / "text.mp4",
        "frames": tmp_path / "frames.mp4",
        "size": tmp_path / "size.mp4",
        "good": tmp_path / "good.mp4",
    }[case]
    if case == "not_media":
        path.write_text("not a video")
    elif case != "missing":
        write_source(path, frames=16 if case == "frames" else 17, width=80 if case == "size" else 64, audio=False)
    out = tmp_path / "out" / "v.mp4"
    argv = ["--demo", "--prompt", "a", "--output-path", str(out), "--video-path", str(path),
            "--start-time", "0.1", "--end-time", "0.3"]  # fmt: skip
    with pytest.raises(SystemExit) as info:
        retake.main(argv + extra)
    assert info.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    for fragment in fragments:
        assert fragment in err, err
    assert not out.parent.exists()


def test_source_shape_errors_name_the_nearest_valid_values():
    with pytest.raises(ValueError, match=r"20 frames .*use 17 or 25.*height 100 .*use 96 or 128"):
        retake.check_source_shape(20, 100, 64)
    np.testing.assert_equal(retake.check_source_shape(9, 32, 64), None)


@pytest.mark.parametrize(
    ("region", "message"),
    [
        ((0.3, 0.1), "end_time 0.1 must be after start_time 0.3"),
        ((float("nan"), 1.0), "start_time nan must be >= 0 seconds"),
        ((0.0, float("inf")), "end_time inf must be after start_time 0.0"),
        ((0.0, 1.0, False, False), "nothing to retake: regenerate_video and regenerate_audio are both off"),
    ],
)
def test_a_region_that_selects_nothing_is_refused_when_made(region, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        RetakeRegion(*region)


def test_help_lists_the_retake_flags(capsys):
    with pytest.raises(SystemExit):
        retake.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("--video-path", "--start-time", "--end-time", "--regenerate-video, --no-regenerate-video",
                  "--regenerate-audio, --no-regenerate-audio", "(default: on)", "--distilled-checkpoint-path",
                  "--max-batch-size", "--lora"):  # fmt: skip
        assert shown in text, shown
    assert "--height" not in text and "--num-frames" not in text  # the source decides


def test_a_region_past_the_clip_or_a_silent_source_is_retaken_with_a_warning(tmp_path, monkeypatch, demo_cache_home,
                                                                             caplog):  # fmt: skip
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    silent = write_source(tmp_path / "silent.mp4", audio=False)  # 17 frames at 24 fps: 0.708 s
    argv = ["--demo", "--prompt", "a", "--output-path", str(tmp_path / "o.mp4"), "--video-path", str(silent),
            "--start-time", "0.1", "--end-time", "5.0"]  # fmt: skip
    with caplog.at_level("WARNING", logger="ltx_pipelines.retake"):
        run = retake.COMMAND.parse(argv)
    assert run[retake.RetakeFlags].region.end_time == 5.0  # the run goes on as typed, and says what it does
    assert "--end-time 5 is past the end of the source video (0.708 s)" in caplog.text
    assert "has no audio track: the output's audio is generated for the whole clip" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="ltx_pipelines.retake"):
        retake.COMMAND.parse([*argv[:-1], "0.3", "--video-path", str(write_source(tmp_path / "loud.mp4"))])
    assert "past the end" not in caplog.text and "no audio track" not in caplog.text
