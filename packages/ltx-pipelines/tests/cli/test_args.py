"""The shared CLI: flag names and defaults, and validation of every kind of bad input (exit code 2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from PIL import Image

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import LoraFusionPrecision, LoraSpec
from ltx_pipelines import distilled, ti2vid_one_stage, ti2vid_two_stages
from ltx_pipelines.cli.command import PipelineCommand, Run
from ltx_pipelines.cli.flag_group import ReadContext
from ltx_pipelines.cli.guidance_flags import GuidanceFlags
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.runtime_flags import OutputFlags
from ltx_pipelines.engine.denoising_stage import ImageCondition
from ltx_pipelines.engine.model_versions import DEFAULT_NEGATIVE_PROMPT, LTX_2_3_DEFAULTS

TWO_STAGE = ti2vid_two_stages.COMMAND


def variant(command: PipelineCommand, *, output: OutputFlags | None = None, **model_changes) -> PipelineCommand:
    """`command` with its model-files group changed (header checks off, an hf:// cache) or another output group."""

    def changed(group):
        if isinstance(group, ModelFlags):
            return dataclasses.replace(group, **model_changes)
        if isinstance(group, OutputFlags) and output is not None:
            return output
        return group

    return dataclasses.replace(command, groups=tuple(changed(group) for group in command.groups))


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


def run(command: PipelineCommand, argv: list[str]) -> Run:
    return command.parse(argv)


def fails(capsys, command: PipelineCommand, argv: list[str], *fragments: str) -> str:
    with pytest.raises(SystemExit) as info:
        run(command, argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_defaults_and_a_valid_run(base_argv, model_files, tmp_path):
    defaults = run(TWO_STAGE, base_argv)
    video, guidance = defaults.video, defaults.guidance
    assert (video.height, video.width, video.num_frames, video.frame_rate, defaults.prompt.seed) == (
        1024, 1536, 121, 24.0, 10
    )  # fmt: skip
    assert guidance.num_inference_steps == 30 and guidance.negative_prompt == DEFAULT_NEGATIVE_PROMPT
    params = defaults.parameters
    assert (params["video_cfg_guidance_scale"], params["video_stg_guidance_scale"]) == (3.0, 1.0)
    assert (params["video_rescale_scale"], params["a2v_guidance_scale"], params["video_skip_step"]) == (0.7, 3.0, 0)
    assert (params["audio_cfg_guidance_scale"], params["v2a_guidance_scale"], params["audio_stg_blocks"]) == (
        7.0, 3.0, [28]
    )  # fmt: skip
    assert (params["dtype"], defaults.log_level, params["overwrite"], params["demo"], params["enhance_prompt"]) == (
        "bfloat16",
        "INFO",
        False,
        False,
        False,
    )

    config = run(
        TWO_STAGE,
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
    models = config.models
    assert models.checkpoint == model_files.checkpoint and "checkpoint_path" in config.parameters
    assert models.model_version == (2, 3, 0)
    assert models.spatial_upsampler == model_files.upsampler and models.gemma_root == model_files.gemma_root
    assert models.distilled_lora == LoraSpec(model_files.lora, 0.6)
    assert config.output.path == tmp_path / "out" / "fox.mp4"
    assert config.video.images == (
        ImageCondition(path=model_files.image, frame_idx=0, strength=1.0, crf=33),  # CRF from the checkpoint's version
        ImageCondition(path=model_files.image, frame_idx=120, strength=0.5, crf=20),
    )
    assert config.guidance.video == MultiModalGuiderParams(
        cfg_scale=3.0, stg_scale=1.0, rescale_scale=0.7, modality_scale=3.0, skip_step=0, stg_blocks=(28,)
    )
    assert config.guidance.audio == MultiModalGuiderParams(
        cfg_scale=7.0, stg_scale=1.0, rescale_scale=0.7, modality_scale=3.0, skip_step=0, stg_blocks=(28,)
    )
    assert config.runtime.device == torch.device("cpu") and config.runtime.dtype == torch.bfloat16
    assert not (tmp_path / "out").exists()  # validation creates nothing


def test_model_version_defaults_flow_into_the_run_and_crf(base_argv, model_files):
    command = dataclasses.replace(
        ti2vid_one_stage.COMMAND,
        groups=tuple(
            GuidanceFlags(audio=False) if isinstance(g, GuidanceFlags) else g for g in ti2vid_one_stage.COMMAND.groups
        ),
    )

    def argv(checkpoint: Path) -> list[str]:
        return [
            "--checkpoint-path", str(checkpoint), "--gemma-root", str(model_files.gemma_root), "--prompt", "p",
            "--output-path", base_argv[base_argv.index("--output-path") + 1], "--device", "cpu",
            "--image", str(model_files.image), "3", "0.9", "--video-stg-blocks", "--video-stg-guidance-scale", "0",
        ]  # fmt: skip

    ltx_2 = run(command, argv(model_files.checkpoint_v20))
    assert ltx_2.guidance.num_inference_steps == 40 and (ltx_2.video.height, ltx_2.video.width) == (512, 768)
    assert ltx_2.guidance.video.stg_blocks == () and ltx_2.guidance.audio is None
    assert ltx_2.video.images[0].crf == 33
    ltx_2_4 = run(command, argv(model_files.checkpoint_v24))
    assert ltx_2_4.guidance.num_inference_steps == 30
    assert ltx_2_4.video.images[0].crf == 18  # a 2.4 checkpoint re-compresses at CRF 18
    assert ltx_2_4.models.spatial_upsampler is None and ltx_2_4.models.distilled_lora is None


def test_distilled_parser(model_files, tmp_path):
    argv = ["--distilled-checkpoint-path", str(model_files.checkpoint), "--gemma-root", str(model_files.gemma_root)]
    argv += ["--spatial-upsampler-path", str(model_files.upsampler), "--prompt", "p"]
    argv += ["--output-path", str(tmp_path / "d.mp4"), "--lora", str(model_files.lora), "--device", "cpu"]
    config = run(distilled.COMMAND, argv)
    assert "distilled_checkpoint_path" in config.parameters and config.models.checkpoint == model_files.checkpoint
    assert config.models.loras == (LoraSpec(model_files.lora, 1.0),)
    assert GuidanceFlags not in config.values and "negative_prompt" not in config.parameters


def test_help_documents_every_flag(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no line wrapping inside the phrases checked below
    with pytest.raises(SystemExit) as info:
        TWO_STAGE.parser(LTX_2_3_DEFAULTS).parse_args(["--help"])
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
    fails(capsys, TWO_STAGE, [*base_argv, *extra], *fragments)


def test_one_stage_accepts_multiples_of_32(capsys, base_argv, model_files, tmp_path):
    argv = ["--checkpoint-path", str(model_files.checkpoint), "--gemma-root", str(model_files.gemma_root)]
    argv += ["--prompt", "p", "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu"]
    one_stage = ti2vid_one_stage.COMMAND
    config = run(one_stage, [*argv, "--height", "544", "--width", "992"])
    assert (config.video.height, config.video.width) == (544, 992)
    fails(capsys, one_stage, [*argv, "--height", "500"], "--height 500", "multiple of 32", "480 or 512")


def test_image_flag_errors(capsys, base_argv, model_files, tmp_path):
    img = str(model_files.image)
    parser = TWO_STAGE
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
    parser = TWO_STAGE
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
    parser = TWO_STAGE
    assert run(parser, base_argv).models.lora_fusion is LoraFusionPrecision.WEIGHT_DTYPE
    config = run(parser, [*base_argv, "--lora-fusion-precision", "float32"])
    assert config.models.lora_fusion is LoraFusionPrecision.FLOAT32
    assert config.parameters["lora_fusion_precision"] == "float32"
    with pytest.raises(SystemExit) as info:
        run(parser, [*base_argv, "--lora-fusion-precision", "fp16"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--lora-fusion-precision" in err and "'weight-dtype'" in err and "'float32'" in err


def test_files_of_the_wrong_kind(capsys, base_argv, model_files):
    parser = TWO_STAGE

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
    run(variant(parser, check_kinds=False), swap("--spatial-upsampler-path", model_files.lora))
    (model_files.gemma_root / "config.json").unlink()
    fails(capsys, parser, base_argv, "--gemma-root", "has no config.json")


def test_missing_model_files(capsys, base_argv, model_files, tmp_path):
    parser = TWO_STAGE
    argv = list(base_argv)
    argv[argv.index("--checkpoint-path") + 1] = str(tmp_path / "nope.safetensors")
    fails(capsys, parser, argv, "--checkpoint-path", "nope.safetensors", "no such file")
    without = [a for a in base_argv if a not in ("--checkpoint-path", str(model_files.checkpoint))]
    fails(capsys, parser, without, "--checkpoint-path is required", "--demo")
    bare = [*base_argv[base_argv.index("--prompt") :]]
    fails(capsys, parser, bare, "is required")
    # With --demo the model flags are optional (the demo's files are substituted after every check).
    group = ModelFlags(distilled=False, two_stage=True, distilled_lora=True)
    args = TWO_STAGE.parser(LTX_2_3_DEFAULTS).parse_args([*bare, "--demo"])
    choice = group.read(args, ReadContext(LTX_2_3_DEFAULTS, demo=True)).value
    assert choice.checkpoint is None and choice.gemma_root is None and choice.distilled_lora is None


def test_output_path_rules(capsys, base_argv, tmp_path):
    parser = TWO_STAGE
    out = Path(base_argv[base_argv.index("--output-path") + 1])
    out.parent.mkdir(parents=True)
    out.write_bytes(b"previous result")
    err = fails(capsys, parser, base_argv, str(out), "already exists", "--overwrite")
    assert "Traceback" not in err
    assert run(parser, [*base_argv, "--overwrite"]).output.overwrite
    assert out.read_bytes() == b"previous result"

    sidecar = out.with_suffix(".json")
    sidecar.write_text("{}")
    out.unlink()
    fails(capsys, parser, base_argv, "fox.json", "--overwrite")  # the sidecar beside it is protected too
    sidecar.unlink()

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
    config = run(variant(TWO_STAGE, output=OutputFlags(suffixes=(".wav",))), argv)
    assert config.output.path.suffix == ".wav"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_device_without_cuda(capsys, base_argv):
    fails(capsys, TWO_STAGE, [*base_argv, "--device", "cuda"], "--device 'cuda'", "CUDA is not available")


def test_distilled_lora_is_required(capsys, base_argv, model_files):
    argv = [a for a in base_argv if a not in ("--distilled-lora", str(model_files.lora), "0.6")]
    fails(capsys, TWO_STAGE, argv, "--distilled-lora PATH [STRENGTH] is required")


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
    config = run(variant(TWO_STAGE, hf_cache_dir=tmp_path / "hub", hf_offline=True), argv)
    assert config.models.checkpoint == snapshot / "ltx.safetensors" and config.models.model_version == (2, 3, 0)
    assert config.models.spatial_upsampler == snapshot / "up.safetensors"


def test_hf_cache_miss_is_reported(capsys, base_argv, tmp_path):
    argv = list(base_argv)
    argv[argv.index("--checkpoint-path") + 1] = "hf://Lightricks/LTX-2/missing.safetensors"
    command = variant(TWO_STAGE, hf_cache_dir=tmp_path / "empty-hub", hf_offline=True)
    fails(capsys, command, argv, "--checkpoint-path", "missing.safetensors", "not in the Hugging Face cache")


def test_exif_image_passes_validation(base_argv, tmp_path):
    # Images are only opened (header) during validation; the orientation is applied when loading.
    path = tmp_path / "rot.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.new("RGB", (40, 20)).save(path, exif=exif)
    config = run(TWO_STAGE, [*base_argv, "--image", str(path), "0", "1"])
    assert config.video.images[0].path == path
