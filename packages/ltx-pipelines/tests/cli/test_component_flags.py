"""The component-file flags (`--transformer-path`, `--text-encoder-path`, `--video-vae-path`, `--audio-vae-path`,
`--duration-head-path`) and `--demo-family`: what a run resolves them to, and every refusal (exit code 2, before
any model is built), on the tiny LTX-2.5 demo files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from ltx_core.loader import Component, Layout, ModelFiles, read_safetensors_header
from ltx_core.model.duration_head import DurationRange
from ltx_pipelines import distilled, lipdub
from ltx_pipelines.cli.command import PipelineCommand, Run
from ltx_pipelines.cli.model_flags import ModelFlags

pytestmark = pytest.mark.slow

DISTILLED = distilled.COMMAND


def component_argv(demo, out: Path) -> list[str]:
    return [
        "--transformer-path", str(demo.transformer),
        "--text-encoder-path", str(demo.text_encoder),
        "--video-vae-path", str(demo.video_vae),
        "--audio-vae-path", str(demo.audio_vae),
        "--spatial-upsampler-path", str(demo.spatial_upsampler),
        "--prompt", "a fox in the snow",
        "--output-path", str(out),
        "--device", "cpu",
        "--height", "128",
        "--width", "192",
        "--num-frames", "9",
    ]  # fmt: skip


@pytest.fixture
def argv(ltx25_demo, tmp_path) -> list[str]:
    return component_argv(ltx25_demo, tmp_path / "out" / "fox.mp4")


def without(argv: list[str], flag: str) -> list[str]:
    i = argv.index(flag)
    return argv[:i] + argv[i + 2 :]


def fails(capsys, command: PipelineCommand, argv: list[str], *fragments: str) -> str:
    with pytest.raises(SystemExit) as info:
        command.parse(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_component_files_resolve_to_one_set_of_model_files(argv, ltx25_demo):
    run: Run = DISTILLED.parse([*argv, "--duration-head-path", str(ltx25_demo.duration_head)])
    files = run.models.checkpoint
    assert isinstance(files, ModelFiles) and files.layout is Layout.SPLIT
    assert files.source(Component.TRANSFORMER).path == ltx25_demo.transformer
    assert files.source(Component.TEXT_ENCODER).path == ltx25_demo.text_encoder
    assert files.source(Component.DURATION_HEAD).path == ltx25_demo.duration_head
    # The packed Gemma 4 file is the text encoder: no --gemma-root.
    assert run.models.gemma_root is None
    assert run.models.model_version == (2, 5, 1) and run.parameters["model_version"] == "2.5.1"
    # The metadata the memory check and the defaults read: the transformer's, with the whole set's sections.
    assert {"transformer", "vae"} <= set(run.models.metadata["config"])
    assert run.models.metadata["config"]["vae"]["_class_name"] == "CausalDiffusionVAE"
    # The sidecar records each file under its component.
    roles = run.models.files()
    assert roles["transformer"] == ltx25_demo.transformer and roles["audio_vae"] == ltx25_demo.audio_vae
    assert "checkpoint" not in roles
    assert run.parameters["transformer_path"] == str(ltx25_demo.transformer)
    assert run.parameters["duration_head_path"] == str(ltx25_demo.duration_head)
    assert run.parameters["distilled_checkpoint_path"] is None and run.parameters["demo_family"] is None


def test_a_mix_of_single_file_and_components_is_refused(capsys, argv, ltx25_demo, tmp_path):
    checkpoint = tmp_path / "single.safetensors"
    checkpoint.write_bytes(ltx25_demo.transformer.read_bytes())
    fails(
        capsys,
        DISTILLED,
        [*argv, "--distilled-checkpoint-path", str(checkpoint)],
        "--distilled-checkpoint-path",
        "--transformer-path",
        "cannot be combined",
    )
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    fails(capsys, DISTILLED, [*argv, "--gemma-root", str(gemma)], "--gemma-root", "--text-encoder-path")


@pytest.mark.parametrize("flag", ["--text-encoder-path", "--video-vae-path", "--audio-vae-path"])
def test_a_component_set_missing_a_needed_part_is_refused(capsys, argv, flag):
    fails(capsys, DISTILLED, without(argv, flag), flag, "this pipeline also needs")


def test_a_missing_transformer_is_refused(capsys, argv):
    fails(capsys, DISTILLED, without(argv, "--transformer-path"), "--transformer-path")


def test_component_files_must_exist_and_be_components(capsys, argv, ltx25_demo, tmp_path):
    bad = list(argv)
    bad[bad.index("--audio-vae-path") + 1] = str(tmp_path / "nope.safetensors")
    fails(capsys, DISTILLED, bad, "--audio-vae-path", "nope.safetensors", "no such file")
    bad = list(argv)
    bad[bad.index("--audio-vae-path") + 1] = str(ltx25_demo.spatial_upsampler)
    fails(capsys, DISTILLED, bad, "--audio-vae-path", "latent upsampler", "not a model component file")
    bad = list(argv)
    bad[bad.index("--transformer-path") + 1] = str(ltx25_demo.audio_vae)
    fails(capsys, DISTILLED, bad, "--transformer-path", "not an LTX-2")


def test_a_component_file_of_another_component_is_refused_up_front(capsys, argv, ltx25_demo, tmp_path):
    """A video VAE or duration head flag given another component's file (it has no section of its own) exits 2
    while the flags are read, not after the prompt encoder ran."""
    bad = list(argv)
    bad[bad.index("--video-vae-path") + 1] = str(ltx25_demo.audio_vae)
    fails(capsys, DISTILLED, bad, "--video-vae-path", "cannot provide the video_vae", "no 'vae' section", "audio_vae")
    bad = [*argv, "--duration-head-path", str(ltx25_demo.transformer)]
    fails(capsys, DISTILLED, bad, "--duration-head-path", "no 'duration_head' section", "['transformer']")
    bad = [*argv, "--duration-head-path", str(ltx25_demo.video_vae)]
    fails(capsys, DISTILLED, bad, "--duration-head-path", "no 'duration_head' section", "['vae']")


def test_a_single_file_with_a_wrong_video_vae_file_is_refused_up_front(capsys, ltx25_demo, demo_model_files, tmp_path):
    demo = demo_model_files
    argv = [
        "--distilled-checkpoint-path", str(demo.checkpoint), "--gemma-root", str(demo.gemma_root),
        "--spatial-upsampler-path", str(demo.spatial_upsampler), "--video-vae-path", str(ltx25_demo.audio_vae),
        "--prompt", "a fox", "--output-path", str(tmp_path / "fox.mp4"), "--device", "cpu",
        "--height", "128", "--width", "192", "--num-frames", "9",
    ]  # fmt: skip
    fails(capsys, DISTILLED, argv, "--video-vae-path", "ltx-2.5-demo-audio-vae", "no 'vae' section")


def test_a_text_encoder_of_another_gemma_version_is_refused(capsys, argv, ltx25_demo, tmp_path):
    header = read_safetensors_header(ltx25_demo.text_encoder)
    metadata = {k: v if isinstance(v, str) else json.dumps(v) for k, v in header.metadata.items()}
    gemma_config = dict(header.metadata["gemma_config"])
    gemma_config["gemma_version"] = "gemma4-other-size"
    metadata["gemma_config"] = json.dumps(gemma_config)
    other = tmp_path / "gemma4-other.safetensors"
    save_file(load_file(str(ltx25_demo.text_encoder)), str(other), metadata=metadata)
    bad = list(argv)
    bad[bad.index("--text-encoder-path") + 1] = str(other)
    wanted = read_safetensors_header(ltx25_demo.transformer).metadata["gemma_source_checkpoint"]["gemma_version"]
    fails(capsys, DISTILLED, bad, "gemma4-other-size", wanted, str(other), str(ltx25_demo.transformer))


def test_component_files_from_hf_paths(argv, ltx25_demo, tmp_path):
    commit = "e" * 40
    repo = tmp_path / "hub" / "models--Lightricks--LTX-2.5"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    hub_argv = list(argv)
    for flag, path in (
        ("--transformer-path", ltx25_demo.transformer),
        ("--text-encoder-path", ltx25_demo.text_encoder),
        ("--audio-vae-path", ltx25_demo.audio_vae),
    ):
        target = snapshot / "components" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        hub_argv[hub_argv.index(flag) + 1] = f"hf://Lightricks/LTX-2.5/components/{path.name}"
    command = dataclasses.replace(
        DISTILLED,
        groups=tuple(
            dataclasses.replace(g, hf_cache_dir=tmp_path / "hub", hf_offline=True) if isinstance(g, ModelFlags) else g
            for g in DISTILLED.groups
        ),
    )
    run = command.parse(hub_argv)
    files = run.models.checkpoint
    assert isinstance(files, ModelFiles)
    assert files.source(Component.TRANSFORMER).path == snapshot / "components" / ltx25_demo.transformer.name
    assert files.source(Component.TEXT_ENCODER).path == snapshot / "components" / ltx25_demo.text_encoder.name
    assert files.source(Component.VIDEO_VAE).path == ltx25_demo.video_vae


def test_demo_family_picks_the_ltx25_component_files(monkeypatch, ltx25_demo_home, ltx25_demo, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    argv = ["--demo", "--demo-family", "ltx-2.5", "--prompt", "a fox", "--output-path", str(tmp_path / "o.mp4")]
    run = DISTILLED.parse([*argv, "--device", "cpu"])
    files = run.models.checkpoint
    assert isinstance(files, ModelFiles) and files.layout is Layout.SPLIT
    assert files.source(Component.TRANSFORMER).path == ltx25_demo.transformer
    assert files.source(Component.DURATION_HEAD).path == ltx25_demo.duration_head
    assert run.models.spatial_upsampler == ltx25_demo.spatial_upsampler
    assert run.parameters["demo_family"] == "ltx-2.5" and run.models.model_version == (2, 5, 1)


def test_demo_family_refusals(capsys, tmp_path):
    base = ["--prompt", "a fox", "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu"]
    fails(capsys, DISTILLED, [*base, "--demo-family", "ltx-2.5"], "--demo-family ltx-2.5 is only used with --demo")
    # The LTX-2.3-only pipelines refuse the 2.5 demo before building anything, naming the one to use.
    fails(
        capsys,
        lipdub.COMMAND,
        [*base, "--reference-video", str(tmp_path / "ref.mp4"), "--demo", "--demo-family", "ltx-2.5"],
        "--demo-family ltx-2.5",
        "ltx-2.3",
        "ltx_pipelines.dubit",
    )
    fails(capsys, DISTILLED, [*base, "--demo", "--demo-family", "ltx-3"], "--demo-family", "invalid choice")
    assert not (tmp_path / "o.mp4").exists()


# ---- the length: --auto-duration, or omitted --num-frames on files with a duration head -------------------


def test_omitted_num_frames_is_predicted_on_files_with_a_duration_head(argv, ltx25_demo):
    command = DISTILLED
    base = without(argv, "--num-frames")
    run = command.parse([*base, "--duration-head-path", str(ltx25_demo.duration_head)])
    video = run.video
    assert video.duration == DurationRange() and not video.frames_given
    # The memory check plans for the longest length of the range (20 s at 24 fps, on the 8k+1 grid).
    assert video.num_frames == 473 and (video.num_frames - 1) % 8 == 0
    assert run.parameters["auto_duration"] == [1.0, 20.0] and run.parameters["num_frames"] is None
    run = command.parse([*base, "--duration-head-path", str(ltx25_demo.duration_head), "--auto-duration", "2", "3"])
    assert run.video.duration == DurationRange(2.0, 3.0) and run.video.num_frames == 65
    # A frame count given is used as it is.
    run = command.parse([*argv, "--duration-head-path", str(ltx25_demo.duration_head)])
    assert run.video.duration is None and run.video.num_frames == 9


def test_length_refusals(capsys, argv, ltx25_demo):
    command = DISTILLED
    base = without(argv, "--num-frames")
    # LTX-2.5 files without a head cannot predict: --num-frames is needed, before anything loads.
    fails(capsys, command, base, "--num-frames is needed", "--duration-head-path")
    fails(capsys, command, [*base, "--auto-duration", "1", "2"], "--auto-duration needs a duration head")
    head = ["--duration-head-path", str(ltx25_demo.duration_head)]
    fails(capsys, command, [*argv, *head, "--auto-duration", "1", "2"], "--num-frames 9 and --auto-duration")
    fails(capsys, command, [*base, *head, "--auto-duration", "3", "1"], "--auto-duration 3 1 is not accepted")
    fails(capsys, command, [*base, *head, "--auto-duration", "0", "1"], "0 < MIN_SECONDS <= MAX_SECONDS")
    fails(capsys, command, [*base, *head, "--auto-duration", "1"], "--auto-duration")


def test_a_separate_prompt_enhancer_needs_enhance_prompt_and_an_existing_path(tmp_path, capsys):
    from ltx_pipelines import distilled

    argv = ["--demo", "--prompt", "a cat", "--output-path", str(tmp_path / "out.mp4")]
    with pytest.raises(SystemExit) as info:
        distilled.main([*argv, "--prompt-enhancer-gemma-root", str(tmp_path)])
    assert info.value.code == 2
    assert "--prompt-enhancer-gemma-root only rewrites prompts with --enhance-prompt" in capsys.readouterr().err
    missing = tmp_path / "no-such-gemma"
    with pytest.raises(SystemExit) as info:
        distilled.main([*argv, "--enhance-prompt", "--prompt-enhancer-gemma-root", str(missing)])
    assert info.value.code == 2
    assert f"--prompt-enhancer-gemma-root {str(missing)!r} does not exist" in capsys.readouterr().err


def test_the_enhancer_reaches_the_pipeline_and_the_sidecar_record(tmp_path):
    from ltx_pipelines import distilled

    enhancer = tmp_path / "enhancer"
    enhancer.mkdir()
    argv = ["--demo", "--prompt", "a cat", "--output-path", str(tmp_path / "out.mp4"), "--enhance-prompt",
            "--prompt-enhancer-gemma-root", str(enhancer)]  # fmt: skip
    run = distilled.COMMAND.parse(argv)
    assert run.pipeline_options()["prompt_enhancer_gemma_root"] == enhancer
    assert run.sidecar_parameters()["prompt_enhancer_gemma_root"] == str(enhancer)


def test_text_to_audio_takes_component_files_without_a_video_vae(ltx25_demo, tmp_path):
    from ltx_pipelines import t2a_one_stage

    argv = [
        "--transformer-path", str(ltx25_demo.transformer), "--text-encoder-path", str(ltx25_demo.text_encoder),
        "--audio-vae-path", str(ltx25_demo.audio_vae), "--prompt", "rain on a tin roof",
        "--output-path", str(tmp_path / "rain.wav"), "--device", "cpu", "--num-frames", "9",
    ]  # fmt: skip
    files = t2a_one_stage.COMMAND.parse(argv).models.checkpoint
    assert isinstance(files, ModelFiles) and not files.has(Component.VIDEO_VAE)
