"""The command-line entry points: help text with every flag and default, one-line errors, the
process_videos / process_captions commands on their own, and the thin scripts."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from ltx_trainer.preprocessing import precomputed as pc

COMMANDS = {
    "split_scenes": ["--detector", "--threshold", "--min-scene-length", "--filter-shorter-than", "--max-scenes",
                     "--skip-start", "--skip-end", "--save-images", "--stats-file", "--luma-only", "--downscale"],
    "caption_videos": ["--output", "--captioner-type", "--vllm-url", "--vllm-model", "--enable-thinking",
                       "--max-tokens", "--instruction", "--extensions", "--recursive", "--fps", "--override",
                       "--api-key", "--num-workers"],
    "serve_captioner": ["--host", "--port", "--quantization", "--hf-home", "--vllm-spec", "--print-cmd"],
    "process_captions": ["--output-dir", "--model-path", "--text-encoder-path", "--caption-column",
                         "--media-column", "--batch-size", "--lora-trigger", "--remove-llm-prefixes", "--overwrite",
                         "--load-text-encoder-in-8bit"],
    "process_videos": ["--resolution-buckets", "--output-dir", "--model-path", "--video-column", "--vae-tiling",
                       "--reshape-mode", "--with-audio", "--audio-output-dir", "--overwrite"],
    "process_dataset": ["--resolution-buckets", "--model-path", "--text-encoder-path", "--video-vae-path",
                        "--audio-vae-path", "--caption-column", "--video-column", "--batch-size", "--device",
                        "--vae-tiling", "--output-dir", "--lora-trigger", "--decode", "--remove-llm-prefixes",
                        "--skip-audio", "--audio-durations", "--reference-downscale-factor",
                        "--reference-temporal-scale-factor", "--overwrite", "--load-text-encoder-in-8bit"],
    "compute_reference": ["--output", "--override", "--batch-size"],
    "decode_latents": ["--model-path", "--video-vae-path", "--audio-vae-path", "--vae-tiling", "--seed",
                       "--with-audio", "--audio-latents-dir", "--overwrite"],
}  # fmt: skip

runner = CliRunner()


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_every_flag_and_defaults(command):
    app = importlib.import_module(f"ltx_trainer.{command}").app
    result = runner.invoke(app, ["--help"], terminal_width=200, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0
    text = _plain(result.output)
    missing = [flag for flag in COMMANDS[command] if flag not in text]
    assert not missing, f"{command} --help lacks {missing}"
    assert "default" in text


def test_scripts_call_the_same_commands():
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    assert sorted(p.stem for p in scripts.glob("*.py")) == sorted([*COMMANDS, "train"])
    result = subprocess.run(
        [sys.executable, str(scripts / "serve_captioner.py"), "--print-cmd"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "vllm serve" in result.stdout
    result = subprocess.run(
        [sys.executable, str(scripts / "train.py"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "--disable-progress-bars" in result.stdout


def test_a_bad_bucket_string_is_one_clear_line(tmp_path, tiny_models):
    from ltx_trainer.process_dataset import app

    (tmp_path / "d.json").write_text(json.dumps([{"video": "a.mp4", "caption": "x"}]))
    args = [str(tmp_path / "d.json"), "--model-path", str(tiny_models.checkpoint)]
    args += ["--text-encoder-path", str(tiny_models.gemma_root), "--resolution-buckets", "512x512x48"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: bucket 512x512x48: frames 48 must be 8k+1 (1, 9, 17, 25, 33, 41, 49, ...)"]


def test_process_videos_and_captions_commands(tmp_path, make_clip, tiny_models):
    from ltx_trainer.process_captions import app as captions_app
    from ltx_trainer.process_videos import app as videos_app

    root = tmp_path / "d"
    make_clip(root / "a.mp4", frames=9, height=64, width=64)
    (root / "d.json").write_text(json.dumps([{"media_path": "a.mp4", "caption": "The video shows a square."}]))
    out = root / ".precomputed"
    result = runner.invoke(
        videos_app,
        [str(root / "d.json"), "--resolution-buckets", "64x64x9", "--output-dir", str(out / "latents"),
         "--model-path", str(tiny_models.checkpoint), "--with-audio", "--reshape-mode", "random", "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert pc.load_sample(out / "latents" / "a.safetensors").tensors["latents"].shape == (128, 2, 2, 2)
    assert (out / "audio_latents" / "a.safetensors").is_file()

    args = [str(root / "d.json"), "--output-dir", str(out / "conditions"), "--model-path", str(tiny_models.checkpoint)]
    args += ["--text-encoder-path", str(tiny_models.gemma_root), "--lora-trigger", "sks", "--remove-llm-prefixes"]
    result = runner.invoke(captions_app, [*args, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    sample = pc.load_sample(out / "conditions" / "a.safetensors")
    assert sample.metadata["caption"] == "sks A square."
    mask = sample.tensors["prompt_attention_mask"]
    assert mask.dtype == torch.bool and mask[-1] and not mask[0]  # left padding: real tokens at the end
    assert torch.isfinite(sample.tensors["video_prompt_embeds"]).all()


@pytest.mark.parametrize(
    ("command", "args", "named"),
    [
        ("process_dataset", ["d.json", "--batch-size", "many"], "'--batch-size'"),
        ("decode_latents", ["latents", "previews", "--no-such-flag"], "--no-such-flag"),
    ],
)
def test_an_argument_error_is_one_line_then_the_help_pointer(command, args, named):
    """Issue 33.12: click's report put a usage block first and the error last; now the error is the first line
    (naming the flag) and the second points at --help."""
    app = importlib.import_module(f"ltx_trainer.{command}").app
    result = runner.invoke(app, args, prog_name=f"python -m ltx_trainer.{command}")
    assert result.exit_code == 2
    lines = [line for line in _plain(result.output).splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and named in lines[0], lines
    assert lines[1:] == [f"run `python -m ltx_trainer.{command} --help` for the flags"], lines


def test_train_argument_error_is_one_line_then_the_help_pointer(capsys):
    from ltx_trainer.train import main

    with pytest.raises(SystemExit) as info:
        main(["--log-every", "often"])
    assert info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("python -m ltx_trainer.train: error: argument --log-every") and "'often'" in lines[0]
    assert lines[1:] == ["run `python -m ltx_trainer.train --help` for the flags"]
