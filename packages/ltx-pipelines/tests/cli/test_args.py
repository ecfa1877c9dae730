"""The shared CLI: flag names and defaults, and validation of every kind of bad input (exit code 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
from PIL import Image

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import LoraFusionPrecision, LoraSpec
from ltx_pipelines.cli.args import (
    RunConfig,
    ValidationRules,
    add_common_args,
    add_guidance_args,
    add_lora_args,
    add_model_args,
    add_sampling_args,
    add_two_stage_args,
    add_video_args,
    make_parser,
    validate_args,
)
from ltx_pipelines.engine.defaults import DEFAULT_NEGATIVE_PROMPT, LTX_2_DEFAULTS
from ltx_pipelines.engine.stages import ImageCondition


def two_stage_parser(*, distilled: bool = False) -> argparse.ArgumentParser:
    parser = make_parser("ti2vid_two_stages")
    add_model_args(parser, distilled=distilled)
    add_two_stage_args(parser, distilled_lora=not distilled)
    add_video_args(parser, two_stage=True)
    if not distilled:
        add_sampling_args(parser)
        add_guidance_args(parser)
    add_lora_args(parser)
    add_common_args(parser)
    return parser


def one_stage_parser() -> argparse.ArgumentParser:
    parser = make_parser("ti2vid_one_stage")
    add_model_args(parser, distilled=False)
    add_video_args(parser, two_stage=False)
    add_sampling_args(parser)
    add_guidance_args(parser)
    add_lora_args(parser)
    add_common_args(parser)
    return parser


@pytest.fixture
def base_argv(model_files, tmp_path) -> list[str]:
    return [
        "--checkpoint-path", str(model_files.checkpoint),
        "--gemma-root", str(model_files.gemma_root),
        "--spatial-upsampler-path", str(model_files.upsampler),
        "--distilled-lora", str(model_files.lora), "0.6",
        "--prompt", "a fox in the snow",
        "--output-path", str(tmp_path / "out" / "fox.mp4"),
        "--device", "cpu",
    ]  # fmt: skip


def run(parser: argparse.ArgumentParser, argv: list[str], rules: ValidationRules | None = None) -> RunConfig:
    return validate_args(parser, parser.parse_args(argv), rules)


def fails(capsys, parser: argparse.ArgumentParser, argv: list[str], *fragments: str, rules=None) -> str:
    with pytest.raises(SystemExit) as info:
        run(parser, argv, rules)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_defaults_and_a_valid_run(base_argv, model_files, tmp_path):
    parser = two_stage_parser()
    args = parser.parse_args(base_argv)
    assert (args.height, args.width, args.num_frames, args.frame_rate, args.seed) == (1024, 1536, 121, 24.0, 10)
    assert args.num_inference_steps == 30 and args.negative_prompt == DEFAULT_NEGATIVE_PROMPT
    assert (args.video_cfg_guidance_scale, args.video_stg_guidance_scale, args.video_rescale_scale) == (3.0, 1.0, 0.7)
    assert (args.a2v_guidance_scale, args.video_skip_step, args.video_stg_blocks) == (3.0, 0, [28])
    assert (args.audio_cfg_guidance_scale, args.v2a_guidance_scale, args.audio_stg_blocks) == (7.0, 3.0, [28])
    assert (args.dtype, args.log_level, args.overwrite, args.demo, args.enhance_prompt) == (
        "bfloat16",
        "INFO",
        False,
        False,
        False,
    )

    config = run(
        parser,
        [
            *base_argv,
            "--image",
            str(model_files.image),
            "0",
            "1.0",
            "--image",
            str(model_files.image),
            "120",
            "0.5",
            "20",
        ],
    )
    assert config.checkpoint_path == model_files.checkpoint and not config.distilled_checkpoint
    assert config.model_version == (2, 3, 0)
    assert config.spatial_upsampler_path == model_files.upsampler and config.gemma_root == model_files.gemma_root
    assert config.distilled_lora == LoraSpec(model_files.lora, 0.6)
    assert config.output_path == tmp_path / "out" / "fox.mp4"
    assert config.images == (
        ImageCondition(path=model_files.image, frame_idx=0, strength=1.0, crf=33),  # CRF from the checkpoint's version
        ImageCondition(path=model_files.image, frame_idx=120, strength=0.5, crf=20),
    )
    assert config.video_guidance == MultiModalGuiderParams(
        cfg_scale=3.0, stg_scale=1.0, rescale_scale=0.7, modality_scale=3.0, skip_step=0, stg_blocks=(28,)
    )
    assert config.audio_guidance == MultiModalGuiderParams(
        cfg_scale=7.0, stg_scale=1.0, rescale_scale=0.7, modality_scale=3.0, skip_step=0, stg_blocks=(28,)
    )
    assert config.device == torch.device("cpu") and config.dtype == torch.bfloat16
    assert not (tmp_path / "out").exists()  # validation creates nothing


def test_generation_defaults_flow_into_the_parser_and_crf(base_argv, model_files):
    parser = make_parser()
    add_model_args(parser, distilled=False)
    add_video_args(parser, LTX_2_DEFAULTS, two_stage=False)
    add_sampling_args(parser, LTX_2_DEFAULTS)
    add_guidance_args(parser, LTX_2_DEFAULTS, audio=False)
    add_common_args(parser, LTX_2_DEFAULTS)
    argv = ["--checkpoint-path", str(model_files.checkpoint_v24), "--gemma-root", str(model_files.gemma_root)]
    argv += ["--prompt", "p", "--output-path", base_argv[base_argv.index("--output-path") + 1]]
    config = run(
        parser,
        [*argv, "--image", str(model_files.image), "3", "0.9", "--video-stg-blocks", "--video-stg-guidance-scale", "0"],
    )
    assert config.num_inference_steps == 40 and (config.height, config.width) == (512, 768)
    assert config.video_guidance.stg_blocks == () and config.audio_guidance is None
    assert config.images[0].crf == 18  # a 2.4 checkpoint re-compresses at CRF 18
    assert config.spatial_upsampler_path is None and config.distilled_lora is None


def test_distilled_parser(model_files, tmp_path):
    parser = two_stage_parser(distilled=True)
    argv = ["--distilled-checkpoint-path", str(model_files.checkpoint), "--gemma-root", str(model_files.gemma_root)]
    argv += ["--spatial-upsampler-path", str(model_files.upsampler), "--prompt", "p"]
    argv += ["--output-path", str(tmp_path / "d.mp4"), "--lora", str(model_files.lora), "--device", "cpu"]
    config = run(parser, argv)
    assert config.distilled_checkpoint and config.checkpoint_path == model_files.checkpoint
    assert config.loras == (LoraSpec(model_files.lora, 1.0),)
    assert config.video_guidance is None and config.num_inference_steps is None and config.negative_prompt is None


def test_help_documents_every_flag(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no line wrapping inside the phrases checked below
    with pytest.raises(SystemExit) as info:
        two_stage_parser().parse_args(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--checkpoint-path", "--gemma-root", "--spatial-upsampler-path", "--distilled-lora PATH [STRENGTH]",
        "--image PATH FRAME_IDX STRENGTH [CRF]", "--lora PATH [STRENGTH]", "--num-inference-steps",
        "--video-cfg-guidance-scale", "--video-stg-guidance-scale", "--video-rescale-scale", "--a2v-guidance-scale",
        "--video-skip-step", "--video-stg-blocks", "--audio-cfg-guidance-scale", "--audio-stg-guidance-scale",
        "--audio-rescale-scale", "--v2a-guidance-scale", "--audio-skip-step", "--audio-stg-blocks",
        "--negative-prompt", "--enhance-prompt", "--device", "--dtype", "--overwrite", "--demo", "--log-level",
        "--height", "--width", "--num-frames", "--frame-rate", "--seed", "--prompt", "--output-path",
    ):  # fmt: skip
        assert flag in out, flag
    assert "(default: 1024)" in out and "multiple of 64" in out


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--num-frames", "120"], ["--num-frames 120", "8k+1", "113 or 121"]),
        (["--num-frames", "0"], ["--num-frames 0", "8k+1"]),
        (["--height", "1000"], ["--height 1000", "multiple of 64"]),
        (["--width", "544"], ["--width 544", "multiple of 64"]),
        (["--height", "-64"], ["--height -64", "positive multiple of 64"]),
        (["--frame-rate", "0"], ["--frame-rate 0", "positive"]),
        (["--frame-rate", "nan"], ["--frame-rate nan", "positive"]),
        (["--num-inference-steps", "0"], ["--num-inference-steps 0", "at least 1"]),
        (["--video-skip-step", "-1"], ["--video-skip-step -1", ">= 0"]),
        (["--audio-stg-blocks", "3", "-2"], ["--audio-stg-blocks [3, -2]", ">= 0"]),
        (["--video-cfg-guidance-scale", "inf"], ["--video-cfg-guidance-scale inf", "finite"]),
        (["--seed", str(2**64)], [f"--seed {2**64}", "out of range"]),
        (["--prompt", "  "], ["--prompt is empty"]),
        (["--device", "banana"], ["--device 'banana'", "cpu, cuda"]),
        (["--dtype", "float16"], ["--dtype", "invalid choice", "float16"]),
        (["--log-level", "loud"], ["--log-level", "invalid choice"]),
    ],
)
def test_bad_values(capsys, base_argv, extra, fragments):
    fails(capsys, two_stage_parser(), [*base_argv, *extra], *fragments)


def test_one_stage_accepts_multiples_of_32(capsys, base_argv, model_files, tmp_path):
    argv = ["--checkpoint-path", str(model_files.checkpoint), "--gemma-root", str(model_files.gemma_root)]
    argv += ["--prompt", "p", "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu"]
    config = run(one_stage_parser(), [*argv, "--height", "544", "--width", "992"])
    assert (config.height, config.width) == (544, 992)
    fails(capsys, one_stage_parser(), [*argv, "--height", "500"], "--height 500", "multiple of 32", "480 or 512")
    config = run(one_stage_parser(), [*argv, "--height", "512", "--width", "512"], ValidationRules(spatial_multiple=64))
    with pytest.raises(SystemExit):
        run(one_stage_parser(), [*argv, "--height", "544"], ValidationRules(spatial_multiple=64))


def test_image_flag_errors(capsys, base_argv, model_files, tmp_path):
    img = str(model_files.image)
    parser = two_stage_parser()
    fails(capsys, parser, [*base_argv, "--image", img, "0"], "--image", "3 or 4 values")
    fails(capsys, parser, [*base_argv, "--image", img, "0", "1", "30", "9"], "3 or 4 values")
    fails(capsys, parser, [*base_argv, "--image", img, "first", "1"], "FRAME_IDX must be an integer", "'first'")
    fails(capsys, parser, [*base_argv, "--image", img, "0", "full"], "STRENGTH must be a number")
    fails(capsys, parser, [*base_argv, "--image", img, "121", "1"], "FRAME_IDX 121", "0..120")
    fails(capsys, parser, [*base_argv, "--image", img, "-1", "1"], "FRAME_IDX -1")
    fails(capsys, parser, [*base_argv, "--image", img, "0", "1.5"], "STRENGTH 1.5", "[0, 1]")
    fails(capsys, parser, [*base_argv, "--image", img, "0", "1", "60"], "CRF 60", "0..51")
    fails(capsys, parser, [*base_argv, "--image", str(tmp_path / "gone.png"), "0", "1"], "gone.png", "no such file")
    text = tmp_path / "notes.jpg"
    text.write_text("not pixels")
    fails(capsys, parser, [*base_argv, "--image", str(text), "0", "1"], "notes.jpg", "not an image")


def test_lora_flag_errors(capsys, base_argv, model_files, tmp_path):
    parser = two_stage_parser()
    lora = str(model_files.lora)
    fails(capsys, parser, [*base_argv, "--lora", lora, "0.5", "7"], "--lora", "PATH and an optional STRENGTH")
    fails(capsys, parser, [*base_argv, "--lora", lora, "strong"], "STRENGTH must be a number", "'strong'")
    fails(
        capsys,
        parser,
        [*base_argv, "--lora", str(tmp_path / "x.safetensors")],
        "--lora",
        "x.safetensors",
        "no such file",
    )
    fails(
        capsys,
        parser,
        [*base_argv, "--lora", str(model_files.upsampler)],
        "--lora",
        "is a latent upsampler",
        "not a LoRA",
    )
    fails(capsys, parser, [*base_argv, "--distilled-lora", lora], "--distilled-lora was given 2 times")


def test_lora_fusion_precision_defaults_to_the_reference_rule(capsys, base_argv):
    parser = two_stage_parser()
    assert parser.parse_args(base_argv).lora_fusion_precision == "weight-dtype"
    assert run(parser, base_argv).lora_fusion is LoraFusionPrecision.WEIGHT_DTYPE
    config = run(parser, [*base_argv, "--lora-fusion-precision", "float32"])
    assert config.lora_fusion is LoraFusionPrecision.FLOAT32
    with pytest.raises(SystemExit) as info:
        parser.parse_args([*base_argv, "--lora-fusion-precision", "fp16"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--lora-fusion-precision" in err and "'weight-dtype'" in err and "'float32'" in err


def test_files_of_the_wrong_kind(capsys, base_argv, model_files):
    parser = two_stage_parser()

    def swap(flag: str, value: Path) -> list[str]:
        argv = list(base_argv)
        argv[argv.index(flag) + 1] = str(value)
        return argv

    err = fails(capsys, parser, swap("--spatial-upsampler-path", model_files.checkpoint), "--spatial-upsampler-path")
    assert (
        "ltx-2.3-22b-distilled.safetensors" in err
        and "single-file model checkpoint" in err
        and "not a latent upsampler" in err
    )
    fails(capsys, parser, swap("--spatial-upsampler-path", model_files.temporal_upsampler), "temporal-only upsampler")
    fails(capsys, parser, swap("--checkpoint-path", model_files.lora), "--checkpoint-path", "is a LoRA", "not an LTX-2")
    fails(
        capsys,
        parser,
        swap("--checkpoint-path", model_files.not_safetensors),
        "--checkpoint-path",
        "not a safetensors file",
    )
    fails(
        capsys,
        parser,
        swap("--distilled-lora", model_files.checkpoint),
        "--distilled-lora",
        "single-file model checkpoint",
    )
    fails(capsys, parser, swap("--gemma-root", model_files.checkpoint), "--gemma-root", "not a folder")
    # Header checks can be switched off (tests of other rules); the folder shape is still checked.
    run(parser, swap("--spatial-upsampler-path", model_files.lora), ValidationRules(check_kinds=False))
    (model_files.gemma_root / "config.json").unlink()
    fails(capsys, parser, base_argv, "--gemma-root", "has no config.json")


def test_missing_model_files(capsys, base_argv, model_files, tmp_path):
    parser = two_stage_parser()
    argv = list(base_argv)
    argv[argv.index("--checkpoint-path") + 1] = str(tmp_path / "nope.safetensors")
    fails(capsys, parser, argv, "--checkpoint-path", "nope.safetensors", "no such file")
    without = [a for a in base_argv if a not in ("--checkpoint-path", str(model_files.checkpoint))]
    fails(capsys, parser, without, "--checkpoint-path is required", "--demo")
    bare = [*base_argv[base_argv.index("--prompt") :]]
    fails(capsys, parser, bare, "is required")
    config = run(parser, [*bare, "--demo"])
    assert config.demo and config.checkpoint_path is None and config.gemma_root is None


def test_output_path_rules(capsys, base_argv, tmp_path):
    parser = two_stage_parser()
    out = Path(base_argv[base_argv.index("--output-path") + 1])
    out.parent.mkdir(parents=True)
    out.write_bytes(b"previous result")
    err = fails(capsys, parser, base_argv, str(out), "already exists", "--overwrite")
    assert "Traceback" not in err
    assert run(parser, [*base_argv, "--overwrite"]).overwrite
    assert out.read_bytes() == b"previous result"

    sidecar = out.with_suffix(".json")
    sidecar.write_text("{}")
    out.unlink()
    fails(capsys, parser, base_argv, "fox.json", "--overwrite", rules=ValidationRules(writes_sidecar=True))
    run(parser, base_argv)  # without a sidecar the .json beside it does not matter

    argv = list(base_argv)
    argv[argv.index("--output-path") + 1] = str(tmp_path / "fox.avi")
    fails(capsys, parser, argv, "fox.avi", "must end in .mp4")
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    argv[argv.index("--output-path") + 1] = str(blocker / "fox.mp4")
    fails(capsys, parser, argv, "--output-path", "not a folder")
    (tmp_path / "dir.mp4").mkdir()
    argv[argv.index("--output-path") + 1] = str(tmp_path / "dir.mp4")
    fails(capsys, parser, argv, "--output-path", "is a directory")


def test_wav_output_for_audio_only_pipelines(base_argv, tmp_path):
    argv = list(base_argv)
    argv[argv.index("--output-path") + 1] = str(tmp_path / "a.wav")
    config = run(two_stage_parser(), argv, ValidationRules(output_suffixes=(".wav",)))
    assert config.output_path.suffix == ".wav"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_device_without_cuda(capsys, base_argv):
    fails(capsys, two_stage_parser(), [*base_argv, "--device", "cuda"], "--device 'cuda'", "CUDA is not available")


def test_distilled_lora_is_required(capsys, base_argv, model_files):
    argv = [a for a in base_argv if a not in ("--distilled-lora", str(model_files.lora), "0.6")]
    fails(capsys, two_stage_parser(), argv, "--distilled-lora PATH [STRENGTH] is required")


def test_hf_paths_resolve_through_the_cache(base_argv, model_files, tmp_path):
    commit = "f" * 40
    repo = tmp_path / "hub" / "models--Lightricks--LTX-2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "ltx.safetensors").write_bytes(model_files.checkpoint.read_bytes())
    (snapshot / "up.safetensors").write_bytes(model_files.upsampler.read_bytes())
    argv = list(base_argv)
    argv[argv.index("--checkpoint-path") + 1] = "hf://Lightricks/LTX-2/ltx.safetensors"
    argv[argv.index("--spatial-upsampler-path") + 1] = "hf://Lightricks/LTX-2/up.safetensors"
    rules = ValidationRules(hf_cache_dir=tmp_path / "hub", hf_offline=True)
    config = run(two_stage_parser(), argv, rules)
    assert config.checkpoint_path == snapshot / "ltx.safetensors" and config.model_version == (2, 3, 0)
    assert config.spatial_upsampler_path == snapshot / "up.safetensors"


def test_hf_cache_miss_is_reported(capsys, base_argv, tmp_path):
    argv = list(base_argv)
    argv[argv.index("--checkpoint-path") + 1] = "hf://Lightricks/LTX-2/missing.safetensors"
    rules = ValidationRules(hf_cache_dir=tmp_path / "empty-hub", hf_offline=True)
    fails(
        capsys,
        two_stage_parser(),
        argv,
        "--checkpoint-path",
        "missing.safetensors",
        "not in the Hugging Face cache",
        rules=rules,
    )


def test_exif_image_passes_validation(base_argv, tmp_path):
    # Images are only opened (header) during validation; the orientation is applied when loading.
    path = tmp_path / "rot.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.new("RGB", (40, 20)).save(path, exif=exif)
    config = run(two_stage_parser(), [*base_argv, "--image", str(path), "0", "1"])
    assert config.images[0].path == path
