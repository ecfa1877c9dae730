"""`hdr_ic_lora` on the tiny in-process models: EXR frames (half float, HDR values), the 10-bit HLG HEVC
master, the sidecar, reproducibility, the signal pieces (LogC3, reflect padding, tiles) and the checks
of its own command line. No golden fixture is read here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import ltx_pipelines.hdr_ic_lora as hdr
from ltx_core.latent_tiles import AxisTileCount, TileCounts, latent_tiles, split_by_count
from ltx_core.loader import read_checkpoint_config
from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS
from ltx_pipelines.io.hdr import fit_reflect_pad, logc3_decode, logc3_encode
from ltx_pipelines.io.hdr_outputs import read_exr_frame, write_exr_frames

FRAMES, HEIGHT, WIDTH, FPS = 9, 72, 100, 24  # not multiples of 64: generated padded, cropped back


@pytest.fixture(scope="module")
def files(tiny_models, write_clip, write_tiny_lora, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hdr")
    width = read_checkpoint_config(tiny_models.checkpoint)["transformer"]["cross_attention_dim"]
    embeddings = folder / "embeddings.safetensors"
    g = torch.Generator().manual_seed(0)
    save_file(
        {"video_context": torch.randn(1, 128, width, generator=g), "audio_context": torch.zeros(1, 128, 4)},
        str(embeddings),
    )
    wrong = folder / "wrong.safetensors"
    save_file({"video_context": torch.zeros(1, 128, width + 1)}, str(wrong))
    text = folder / "text.mp4"
    text.write_text("not a video")
    return {
        "input": write_clip(folder / "clip.mp4", frames=FRAMES, height=HEIGHT, width=WIDTH, fps=FPS, audio_rate=None),
        "short": write_clip(folder / "short.mp4", frames=5, height=HEIGHT, width=WIDTH, fps=FPS, audio_rate=None),
        "text": text,
        "embeddings": embeddings,
        "wrong_embeddings": wrong,
        "lora": write_tiny_lora(tiny_models.checkpoint, folder / "hdr_lora.safetensors", scale=0.3),
        "checkpoint": tiny_models.checkpoint,
        "upsampler": tiny_models.spatial_upsampler,
    }


def _argv(files: dict[str, Path], out: Path, *extra: str, **flags: str | None) -> list[str]:
    values: dict[str, Any] = {
        "--input": files["input"], "--output-dir": out, "--distilled-checkpoint-path": files["checkpoint"],
        "--spatial-upsampler-path": files["upsampler"], "--hdr-lora": files["lora"],
        "--text-embeddings": files["embeddings"], "--num-frames": FRAMES, "--device": "cpu", "--dtype": "float32",
        "--log-level": "WARNING",
    }  # fmt: skip
    for flag, value in flags.items():
        values["--" + flag.replace("_", "-")] = value
    return [str(x) for k, v in values.items() if v is not None for x in (k, v)] + list(extra)


@pytest.fixture(scope="module")
def runs(files, tmp_path_factory) -> dict[str, Path]:
    outs = {}
    for name in ("a", "b"):
        out = tmp_path_factory.mktemp(f"hdr_out_{name}")
        assert hdr.main(_argv(files, out)) == 0
        outs[name] = out
    return outs


@pytest.mark.slow
def test_exr_frames_are_half_float_at_the_input_size_with_hdr_values(runs):
    frames = sorted((runs["a"] / "clip_exr").glob("frame_*.exr"))
    assert [p.name for p in frames] == [f"frame_{i:05d}.exr" for i in range(FRAMES)]
    pixels = np.stack([read_exr_frame(p) for p in frames])
    assert pixels.dtype == np.float16
    assert pixels.shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert np.isfinite(pixels).all() and pixels.min() >= 0
    assert pixels.max() > 1.0, "scene-linear output never exceeded diffuse white"


@pytest.mark.slow
def test_master_is_10_bit_hevc_tagged_bt2020_hlg(runs):
    with av.open(str(runs["a"] / "clip.mp4")) as container:
        stream = container.streams.video[0]
        cc = stream.codec_context
        assert cc.name == "hevc" and cc.pix_fmt == "yuv420p10le"
        assert (cc.color_primaries, cc.color_trc, cc.colorspace) == (9, 18, 9)  # BT.2020, HLG, BT.2020 NCL
        assert stream.average_rate == FPS
        decoded = list(container.decode(video=0))
    assert len(decoded) == FRAMES
    assert (decoded[0].width, decoded[0].height) == (WIDTH, HEIGHT)
    assert decoded[0].format.name == "yuv420p10le"
    assert int(decoded[0].to_ndarray().max()) > 255, "the 10-bit codes never left the 8-bit range"


@pytest.mark.slow
def test_sidecar_lists_every_parameter_and_same_seed_repeats(runs):
    sidecar = json.loads((runs["a"] / "clip.json").read_text())
    dests = {a.dest for a in hdr.COMMAND.parser(LTX_2_3_DEFAULTS)._actions} - {"help", "log_level"}
    assert not dests - set(sidecar["parameters"]), f"missing {dests - set(sidecar['parameters'])}"
    assert sidecar["video"] == {"num_frames": FRAMES, "height": HEIGHT, "width": WIDTH, "frame_rate": FPS}
    assert sidecar["output"] == {"exr_frames": "clip_exr", "hevc_master": "clip.mp4"}
    for i in range(FRAMES):
        name = f"clip_exr/frame_{i:05d}.exr"
        np.testing.assert_array_equal(read_exr_frame(runs["a"] / name), read_exr_frame(runs["b"] / name))


@pytest.mark.slow
def test_skip_mp4_writes_only_the_exr_frames(files, tmp_path):
    assert hdr.main(_argv(files, tmp_path, "--skip-mp4", num_frames="1")) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.json", "clip_exr"]
    assert len(list((tmp_path / "clip_exr").iterdir())) == 1


# ---- the signal pieces ----------------------------------------------------------------------------


def test_logc3_round_trips_scene_light_and_keeps_highlights():
    linear = torch.tensor([0.0, 0.005, 0.18, 1.0, 4.0, 30.0])
    codes = logc3_encode(linear)
    assert bool(((codes >= 0) & (codes <= 1)).all()) and bool((codes[1:] > codes[:-1]).all())
    torch.testing.assert_close(logc3_decode(codes), linear, rtol=1e-4, atol=1e-5)
    assert float(logc3_decode(torch.tensor(1.0))) > 50.0


def test_exr_writer_keeps_values_above_one_in_half_float(tmp_path):
    frames = torch.tensor([[[[0.25, 1.5, 12.0]]]]).expand(2, 4, 6, 3)
    assert write_exr_frames(tmp_path / "exr", [frames]) == 2
    back = read_exr_frame(tmp_path / "exr" / "frame_00001.exr")
    assert back.dtype == np.float16 and back.shape == (4, 6, 3)
    np.testing.assert_array_equal(back[0, 0], np.array([0.25, 1.5, 12.0], dtype=np.float16))
    with pytest.raises(FileExistsError):
        write_exr_frames(tmp_path / "exr", [frames])


def test_reflect_pad_keeps_the_input_top_left_and_mirrors_into_the_padding():
    frames = torch.rand(2, 3, 5, 3)
    padded = fit_reflect_pad(frames, 4, 8)  # (1, 3, F, 4, 8)
    assert padded.shape == (1, 3, 2, 4, 8)
    torch.testing.assert_close(padded[0, :, :, :3, :5], frames.permute(3, 0, 1, 2))
    torch.testing.assert_close(padded[0, :, :, 3, :5], frames[:, 1].permute(2, 0, 1))  # row 3 mirrors row 1
    torch.testing.assert_close(padded[0, :, :, :3, 5], frames[:, :, 3].permute(2, 0, 1))  # column 5 mirrors 3


def test_stage_2_tiles_split_each_axis_in_two_and_blend_to_one():
    assert split_by_count(21, AxisTileCount(2, 8)) == [(0, 14), (6, 21)]
    assert split_by_count(4, AxisTileCount(2, 6)) == [(0, 3), (1, 4)]  # overlap reduced to fit
    assert split_by_count(1, AxisTileCount(2, 6)) == [(0, 1)]  # too short to split
    tiles = latent_tiles(
        (1, 128, 21, 10, 12), TileCounts(AxisTileCount(2, 8), AxisTileCount(2, 6), AxisTileCount(2, 6))
    )
    assert len(tiles) == 8
    total = torch.zeros(21, 10, 12)
    for tile in tiles:
        assert bool((tile.weights > 0).all())
        total[tile.cells] += 1
    assert bool((total >= 1).all()), "a latent cell is in no tile"


def test_high_quality_keeps_every_other_frame_across_chunks():
    chunks = [torch.arange(3).float(), torch.arange(3, 8).float(), torch.arange(8, 9).float()]
    kept = torch.cat(list(hdr._every_other(iter(chunks))))
    assert kept.tolist() == [0, 2, 4, 6, 8]


# ---- command line -----------------------------------------------------------------------------------


class ModelBuilt(AssertionError):
    pass


@pytest.fixture
def no_model_building(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ModelBuilt("a model was built before the input was validated")

    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", refuse)
    monkeypatch.setattr("ltx_pipelines.demo.ensure_demo_assets", refuse)


INVALID = {
    "input_missing": ({"input": "{tmp}/nope.mp4"}, [], ["--input", "nope.mp4", "no such file"]),
    "input_undecodable": ({"input": "{text}"}, [], ["--input", "text.mp4", "decoded"]),
    "input_too_short": ({"input": "{short}"}, [], ["5 frames", "--num-frames 9", "--num-frames 1"]),
    "frames_not_8k_plus_1": ({"num_frames": "10"}, [], ["--num-frames 10", "8k+1"]),
    "spatial_tile_too_small": ({"spatial_tile": "256"}, [], ["--spatial-tile 256"]),
    "spatial_tile_not_multiple_of_32": ({"spatial_tile": "700"}, [], ["--spatial-tile 700"]),
    "embeddings_missing": ({"text_embeddings": "{tmp}/none.safetensors"}, [], ["--text-embeddings", "no such file"]),
    "embeddings_wrong_width": ({"text_embeddings": "{wrong}"}, [], ["--text-embeddings", "video_context has shape"]),
    "embeddings_not_given": ({"text_embeddings": None}, [], ["--text-embeddings is required"]),
    "lora_not_given": ({"hdr_lora": None}, [], ["--hdr-lora is required"]),
    "lora_is_a_checkpoint": ({"hdr_lora": "{ckpt}"}, [], ["--hdr-lora", "not a LoRA"]),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_cli_rejects_bad_input_before_building(case, files, tmp_path, no_model_building, capsys):
    flags, extra, expected = INVALID[case]
    names = {"tmp": tmp_path, "text": files["text"], "short": files["short"], "wrong": files["wrong_embeddings"],
             "ckpt": files["checkpoint"]}  # fmt: skip
    out = tmp_path / "out"
    argv = _argv(files, out, *extra, **{k: v.format(**names) if v else v for k, v in flags.items()})
    with pytest.raises(SystemExit) as exit_info:
        hdr.main(argv)
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    for text in expected:
        assert text in message, f"{text!r} not in {message!r}"
    assert not out.exists()


def test_cli_refuses_existing_outputs_without_overwrite(files, tmp_path, no_model_building, capsys):
    (tmp_path / "clip_exr").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        hdr.main(_argv(files, tmp_path))
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert "clip_exr" in message and "--overwrite" in message
    assert list((tmp_path / "clip_exr").iterdir()) == []


def test_cli_guard_trips_once_the_input_is_valid(files, tmp_path, no_model_building, capsys):
    # Valid input reaches the guard (the run then fails with one error line, exit 1).
    assert hdr.main(_argv(files, tmp_path / "out")) == 1
    assert ModelBuilt.__name__ in capsys.readouterr().err
