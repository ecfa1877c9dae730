"""Command lines of the full-checkpoint pipelines: bad input ends with exit code 2 and a message that
names the value before any model loads or any file is written; `--demo` runs on random weights."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.loader import read_checkpoint_config, read_safetensors_header
from ltx_pipelines import ti2vid_one_stage, ti2vid_two_stages, ti2vid_two_stages_hq

MAINS = {
    "one_stage": ti2vid_one_stage.main,
    "two_stages": ti2vid_two_stages.main,
    "two_stages_hq": ti2vid_two_stages_hq.main,
}


@pytest.fixture
def files(tmp_path, tiny_checkpoint, tiny_spatial_upsampler) -> dict[str, Path]:
    """The tiny model files, a Gemma-shaped folder (validation only looks at its file names) and a LoRA."""
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (gemma / name).write_text("{}")
    (gemma / "config.json").write_text('{"model_type": "gemma3"}')
    lora = tmp_path / "lora.safetensors"
    # A LoRA that fits the checkpoint's to_q (LoRAs are checked against the weights' shapes up front).
    to_q = "model.diffusion_model.transformer_blocks.0.attn1.to_q.weight"
    out_features, in_features = read_safetensors_header(tiny_checkpoint).tensors[to_q].shape
    save_file(
        {
            "diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight": torch.zeros(2, in_features),
            "diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight": torch.zeros(out_features, 2),
        },
        str(lora),
    )
    return {
        "checkpoint": tiny_checkpoint,
        "upsampler": tiny_spatial_upsampler,
        "gemma": gemma,
        "lora": lora,
        "out": tmp_path / "out" / "video.mp4",
    }


def _argv(case: str, files: dict[str, Path], **overrides: str | list[str] | None) -> list[str]:
    """A valid command line for `case`; an override replaces a flag's value (a list: its values),
    None drops the flag."""
    flags: dict[str, str | list[str] | None] = {
        "--checkpoint-path": str(files["checkpoint"]),
        "--gemma-root": str(files["gemma"]),
        "--prompt": "a fox",
        "--output-path": str(files["out"]),
        "--device": "cpu",
        "--height": "128",
        "--width": "128",
        "--num-frames": "9",
        "--video-stg-blocks": "0",  # block 0 exists in any checkpoint (the defaults assume 48 blocks)
        "--audio-stg-blocks": "0",
    }
    if case != "one_stage":
        flags["--spatial-upsampler-path"] = str(files["upsampler"])
        flags["--distilled-lora"] = str(files["lora"])
    for flag, value in overrides.items():
        flags["--" + flag.replace("_", "-")] = value
    argv: list[str] = []
    for flag, value in flags.items():
        if value is not None:
            argv += [flag, *value] if isinstance(value, list) else [flag, value]
    return argv


def _fails(capsys, case: str, argv: list[str], *fragments: str) -> None:
    with pytest.raises(SystemExit) as info:
        MAINS[case](argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


BAD_INPUTS = [
    ("one_stage", {"height": "100"}, ("--height 100", "multiple of 32")),
    ("two_stages", {"height": "96"}, ("--height 96", "multiple of 64")),
    ("two_stages_hq", {"width": "160"}, ("--width 160", "multiple of 64")),
    ("two_stages_hq", {"num_frames": "10"}, ("--num-frames 10", "8k+1")),
    ("one_stage", {"num_frames": "0"}, ("--num-frames 0", "8k+1")),
    ("two_stages", {"distilled_lora": None}, ("--distilled-lora PATH [STRENGTH] is required",)),
    ("two_stages_hq", {"distilled_lora": None}, ("--distilled-lora PATH [STRENGTH] is required",)),
    ("one_stage", {"max_batch_size": "0"}, ("--max-batch-size", "0 is not accepted")),
    ("two_stages_hq", {"distilled_lora_strength_stage_2": "nan"}, ("--distilled-lora-strength-stage-2", "'nan'")),
    ("one_stage", {"audio_stg_blocks": []}, ("--audio-stg-guidance-scale 1.0 needs at least one block",)),
    ("two_stages", {"num_inference_steps": "0"}, ("--num-inference-steps 0",)),
]


@pytest.mark.parametrize(("case", "overrides", "fragments"), BAD_INPUTS)
def test_bad_values_are_refused(capsys, files, case, overrides, fragments):
    _fails(capsys, case, _argv(case, files, **overrides), *fragments)
    assert not files["out"].parent.exists()


@pytest.mark.parametrize("case", sorted(MAINS))
def test_files_of_the_wrong_kind_are_named(capsys, files, case):
    _fails(
        capsys,
        case,
        _argv(case, files, checkpoint_path=str(files["upsampler"])),
        "--checkpoint-path",
        "is a latent upsampler",
        "not an LTX-2 single-file model checkpoint",
    )
    if case != "one_stage":
        _fails(
            capsys,
            case,
            _argv(case, files, spatial_upsampler_path=str(files["checkpoint"])),
            "--spatial-upsampler-path",
            "is an LTX-2 single-file model checkpoint",
            "not a latent upsampler",
        )
        _fails(
            capsys,
            case,
            _argv(case, files, distilled_lora=str(files["upsampler"])),
            "--distilled-lora",
            "not a LoRA",
        )
    assert not files["out"].parent.exists()


def test_stg_blocks_must_exist_in_the_checkpoints_transformer(capsys, files):
    layers = int(read_checkpoint_config(files["checkpoint"], "transformer")["num_layers"])
    _fails(
        capsys,
        "two_stages",
        _argv("two_stages", files, video_stg_blocks=["0", str(layers)]),
        f"--video-stg-blocks [0, {layers}]",
        f"block(s) [{layers}] do not exist",
        f"has {layers} blocks",
    )
    assert not files["out"].parent.exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MAINS))
def test_demo_runs_on_random_weights_and_says_so(tmp_path_factory, monkeypatch, caplog, demo_cache_home, case):
    # The session's demo model set, already built under a test-owned cache folder, for the three runs.
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    out = tmp_path_factory.mktemp(f"demo_{case}") / "demo.mp4"
    with caplog.at_level(logging.WARNING):
        argv = ["--demo", "--prompt", "a fox", "--output-path", str(out), "--num-inference-steps", "2"]
        assert MAINS[case]([*argv, "--max-batch-size", "4", "--num-frames", "9", "--log-level", "WARNING"]) == 0
    assert "Demo weights are random" in caplog.text
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["parameters"]["demo_weights"] == "random (demo)"
    layers = int(read_checkpoint_config(sidecar["model_files"]["checkpoint"]["path"], "transformer")["num_layers"])
    guidance = sidecar["parameters"]
    if guidance["video_stg_guidance_scale"] != 0:
        # The default STG blocks of a 48-block model moved into the demo model.
        assert max(guidance["video_stg_blocks"]) < layers and "demo model has" in caplog.text


def test_default_stg_blocks_fit_a_small_checkpoint_but_chosen_ones_are_checked(caplog):
    """The defaults name block 28 of the released 48-block models: a command without STG flags (the
    train-model skill's render line) must still run on a 2-block checkpoint; a block the user typed must exist."""
    import argparse
    from pathlib import Path

    from ltx_pipelines.cli.flag_group import FlagError, ReadContext
    from ltx_pipelines.cli.guidance_flags import GuidanceFlags
    from ltx_pipelines.cli.model_resolution import RunModels
    from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS

    group = GuidanceFlags()
    parser = argparse.ArgumentParser()
    group.add(parser, LTX_2_3_DEFAULTS)
    context = ReadContext(LTX_2_3_DEFAULTS, demo=False)
    two_blocks = RunModels(Path("m"), None, metadata={"config": {"transformer": {"num_layers": 2}}})
    defaulted = group.read(parser.parse_args([]), context).value
    assert defaulted.video is not None and max(defaulted.video.stg_blocks) >= 2
    with caplog.at_level(logging.WARNING):
        fitted = group.settle(defaulted, two_blocks, context).value
    assert fitted.video.stg_blocks == (1,) and "has 2 transformer blocks" in caplog.text
    typed = group.read(parser.parse_args(["--video-stg-blocks", "5"]), context).value
    with pytest.raises(FlagError, match=r"block\(s\) \[5\] do not exist"):
        group.settle(typed, two_blocks, context)
