"""The command line hands pipelines typed values: the tiling flags become a layout, reading leaves the
parsed arguments alone, and the Python API and the CLI share one set of defaults."""

from __future__ import annotations

import argparse
import copy
import inspect

import pytest
import torch

from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig
from ltx_pipelines import distilled, ti2vid_two_stages
from ltx_pipelines.a2vid_two_stage import A2VidPipelineTwoStage
from ltx_pipelines.cli.command import Run, demo_defaults
from ltx_pipelines.cli.guidance_flags import MaxBatchSizeFlags
from ltx_pipelines.cli.request_flags import VideoFlags
from ltx_pipelines.engine.denoising_stage import ImageCondition
from ltx_pipelines.engine.model_versions import (
    DEFAULT_MAX_BATCH_SIZE,
    LTX_2_3_DEFAULTS,
    ONE_STAGE_SPATIAL_MULTIPLE,
    TWO_STAGE_SPATIAL_MULTIPLE,
)
from ltx_pipelines.keyframe_interpolation import KeyframeInterpolationPipeline
from ltx_pipelines.retake import RetakePipeline
from ltx_pipelines.t2a_one_stage import T2AOneStagePipeline
from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline
from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline
from ltx_pipelines.ti2vid_two_stages_hq import TI2VidTwoStagesHQPipeline

# The pipelines that take `max_batch_size` (guidance passes per transformer call).
GUIDED_PIPELINES = (
    TI2VidOneStagePipeline, TI2VidTwoStagesPipeline, TI2VidTwoStagesHQPipeline, KeyframeInterpolationPipeline,
    A2VidPipelineTwoStage, RetakePipeline, T2AOneStagePipeline,
)  # fmt: skip


def distilled_parser() -> argparse.ArgumentParser:
    return distilled.COMMAND.parser(LTX_2_3_DEFAULTS)


@pytest.fixture
def argv(model_files, tmp_path) -> list[str]:
    return [
        "--distilled-checkpoint-path", str(model_files.checkpoint),
        "--spatial-upsampler-path", str(model_files.upsampler),
        "--gemma-root", str(model_files.gemma_root),
        "--prompt", "a fox", "--output-path", str(tmp_path / "fox.mp4"), "--device", "cpu",
    ]  # fmt: skip


def config_for(argv: list[str]) -> Run:
    return distilled.COMMAND.parse(argv)


def test_no_tiling_flags_leave_the_layout_automatic(argv):
    assert config_for(argv).tiling is None


def test_tile_size_gives_square_spatial_tiles(argv):
    config = config_for([*argv, "--tile-size", "512", "--tile-overlap", "96", "--tile-frames", "0"])
    assert config.tiling == TilingConfig(AxisTiling(), AxisTiling(512, 96), AxisTiling(512, 96))


def test_tile_size_zero_decodes_frames_whole(argv):
    config = config_for([*argv, "--tile-size", "0", "--tile-frames", "0"])
    assert config.tiling == TilingConfig.untiled()


def test_overlap_alone_adjusts_the_automatic_layout(argv):
    config = config_for([*argv, "--height", "1088", "--width", "1920", "--tile-overlap", "128"])
    assert config.tiling == TilingConfig(AxisTiling(80, 24), AxisTiling(448, 128), AxisTiling(768, 128))


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--tile-size", "100"], "--tile-size 100"),
        (["--tile-size", "32"], "--tile-size 32"),
        (["--tile-size", "512", "--tile-overlap", "512"], "--tile-overlap 512"),
        (["--tile-overlap", "48"], "--tile-overlap 48"),
        (["--tile-frames", "12"], "--tile-frames 12"),
        (["--tile-frames", "16", "--tile-frame-overlap", "16"], "--tile-frame-overlap 16"),
    ],
)
def test_bad_tiling_flags_exit_2_naming_the_flag(argv, capsys, extra, fragment):
    with pytest.raises(SystemExit) as info:
        config_for([*argv, *extra])
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_reading_leaves_the_parsed_arguments_unchanged(argv):
    parser = distilled_parser()
    args = parser.parse_args([*argv, "--demo", "--tile-size", "256"])
    before = copy.deepcopy(vars(args))
    distilled.COMMAND.read(args)
    assert vars(args) == before


def test_demo_defaults_are_the_small_float32_run_and_flags_still_win(argv):
    run = config_for([*argv, "--demo", "--height", "256"])
    assert (run.video.height, run.video.width, run.video.num_frames) == (256, 192, 17)
    assert run.runtime.dtype == torch.float32
    assert demo_defaults(LTX_2_3_DEFAULTS, two_stage=True).width == 96  # stage-1 size of the 192-wide demo
    assert LTX_2_3_DEFAULTS.dtype == "bfloat16"  # the real defaults are untouched


def test_python_api_and_cli_share_the_guidance_batch_default():
    parser = ti2vid_two_stages.COMMAND.parser(LTX_2_3_DEFAULTS)
    cli_default = parser.parse_args(["--prompt", "p", "--output-path", "o.mp4"]).max_batch_size
    for pipeline_class in GUIDED_PIPELINES:
        api_default = inspect.signature(pipeline_class.__init__).parameters["max_batch_size"].default
        assert cli_default == api_default == DEFAULT_MAX_BATCH_SIZE, pipeline_class.__name__
    assert any(isinstance(group, MaxBatchSizeFlags) for group in ti2vid_two_stages.COMMAND.groups)
    assert any(isinstance(group, VideoFlags) and group.two_stage for group in ti2vid_two_stages.COMMAND.groups)


def test_spatial_multiples_of_api_and_cli_agree(argv, capsys):
    assert TI2VidTwoStagesPipeline.spatial_multiple == TWO_STAGE_SPATIAL_MULTIPLE
    assert TI2VidOneStagePipeline.spatial_multiple == ONE_STAGE_SPATIAL_MULTIPLE
    with pytest.raises(SystemExit):
        config_for([*argv, "--height", str(TWO_STAGE_SPATIAL_MULTIPLE + ONE_STAGE_SPATIAL_MULTIPLE)])
    assert f"multiple of {TWO_STAGE_SPATIAL_MULTIPLE}" in capsys.readouterr().err


def test_an_image_without_crf_takes_the_checkpoints_generation_default():
    image = ImageCondition(frame_idx=0, strength=1.0)
    assert image.with_default_crf(18).crf == 18
    assert ImageCondition(frame_idx=0, strength=1.0, crf=0).with_default_crf(18).crf == 0  # 0: no re-compression
    with pytest.raises(ValueError, match="no CRF"):
        ImageCondition(frame_idx=0, strength=1.0, path=__file__).load(32, 32)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_sidecar_records_the_decode_layout_used(tmp_path, monkeypatch):
    import json

    from ltx_pipelines.distilled import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "tiled.mp4"
    assert main(["--demo", "--prompt", "p", "--output-path", str(out), "--tile-size", "64", "--tile-overlap", "32",
                 "--tile-frames", "0", "--log-level", "WARNING"]) == 0  # fmt: skip
    recorded = json.loads(out.with_suffix(".json").read_text())["decode_tiling"]
    assert recorded == TilingConfig(AxisTiling(), AxisTiling(64, 32), AxisTiling(64, 32)).to_dict()
