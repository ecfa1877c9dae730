"""Recognising checkpoints, upsamplers and LoRAs from their safetensors headers."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.loader import CheckpointError
from ltx_pipelines.engine.model_loading import check_checkpoint_kind, detect_checkpoint_kind


def test_detects_each_kind(model_files):
    assert detect_checkpoint_kind(model_files.checkpoint).kind == "ltx_checkpoint"
    assert detect_checkpoint_kind(model_files.upsampler).kind == "upsampler"
    assert detect_checkpoint_kind(model_files.lora).kind == "lora"
    info = detect_checkpoint_kind(model_files.checkpoint)
    assert "model_version 2.3.0" in info.description and "transformer" in info.description
    assert "spatial x2" in detect_checkpoint_kind(model_files.upsampler).description
    assert "temporal" in detect_checkpoint_kind(model_files.temporal_upsampler).description


@pytest.mark.parametrize(
    ("attr", "expected", "says"),
    [
        ("checkpoint", "upsampler", "is an LTX-2 single-file model checkpoint"),
        ("checkpoint", "lora", "is an LTX-2 single-file model checkpoint"),
        ("upsampler", "ltx_checkpoint", "is a latent upsampler"),
        ("lora", "ltx_checkpoint", "is a LoRA (1 low-rank pairs)"),
        ("lora", "upsampler", "is a LoRA"),
        ("upsampler", "lora", "is a latent upsampler"),
    ],
)
def test_wrong_kind_names_what_the_file_is(model_files, attr, expected, says):
    path = getattr(model_files, attr)
    with pytest.raises(CheckpointError) as info:
        check_checkpoint_kind(path, expected)
    message = str(info.value)
    assert str(path) in message and says in message and "not " in message


def test_right_kind_passes(model_files):
    assert check_checkpoint_kind(model_files.checkpoint, "ltx_checkpoint").header.metadata["model_version"] == "2.3.0"
    check_checkpoint_kind(model_files.upsampler, "upsampler")
    check_checkpoint_kind(model_files.lora, "lora")


def test_unrecognised_files(tmp_path, model_files):
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        check_checkpoint_kind(model_files.not_safetensors, "ltx_checkpoint")
    with pytest.raises(CheckpointError, match="not found"):
        check_checkpoint_kind(tmp_path / "absent.safetensors", "lora")
    bare = tmp_path / "bare.safetensors"
    save_file({"model.diffusion_model.x.weight": torch.zeros(1)}, str(bare))
    with pytest.raises(CheckpointError, match="without the 'config' metadata"):
        check_checkpoint_kind(bare, "ltx_checkpoint")
    kohya = tmp_path / "kohya.safetensors"
    save_file(
        {"lora_unet_x.lora_down.weight": torch.zeros(1), "lora_unet_x.lora_up.weight": torch.zeros(1)}, str(kohya)
    )
    # kohya files are LoRAs too (read by ltx_core.loader.lora_layouts).
    assert check_checkpoint_kind(kohya, "lora").kind == "lora"
    with pytest.raises(ValueError, match="unknown expected kind"):
        check_checkpoint_kind(model_files.lora, "vae")  # type: ignore[arg-type]


@pytest.mark.golden
def test_released_layout_files(golden_dir, golden_checkpoint, golden_manifest):
    assert detect_checkpoint_kind(golden_checkpoint).kind == "ltx_checkpoint"
    upsamplers = [golden_dir / entry["file"] for entry in golden_manifest["spatial_upsamplers"].values()]
    assert upsamplers, "the golden manifest lists no spatial upsampler"
    for upsampler in upsamplers:
        info = check_checkpoint_kind(upsampler, "upsampler")
        assert "spatial" in info.description
    with pytest.raises(CheckpointError, match="single-file model checkpoint"):
        check_checkpoint_kind(golden_checkpoint, "upsampler")


def test_a_file_without_lora_keys_names_a_key_and_the_accepted_layouts(tmp_path):
    plain = tmp_path / "plain.safetensors"
    save_file({"encoder.proj.weight": torch.zeros(2, 2), "encoder.proj.bias": torch.zeros(2)}, str(plain))
    with pytest.raises(CheckpointError) as info:
        check_checkpoint_kind(plain, "lora")
    message = str(info.value)
    assert "its key 'encoder.proj.bias' is no LoRA factor" in message
    for layout in ("comfyui/ltx-trainer", "bare", "peft", "diffusers", "kohya (lora_unet_"):
        assert layout in message, layout
