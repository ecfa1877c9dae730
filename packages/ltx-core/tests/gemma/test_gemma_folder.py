"""Checking a Gemma folder before loading it, and loading it through transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ltx_core.loader import CheckpointError
from ltx_core.text_encoders.gemma import GemmaTextEncoder, locate_gemma_folder


def _edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_locates_a_complete_folder(tiny_gemma_dir):
    folder = locate_gemma_folder(tiny_gemma_dir)
    config = json.loads((tiny_gemma_dir / "config.json").read_text())
    assert folder.root == tiny_gemma_dir
    assert folder.model_type == "gemma3"
    assert folder.hidden_size == config["text_config"]["hidden_size"]
    assert folder.num_hidden_states == config["text_config"]["num_hidden_layers"] + 1
    assert folder.weight_files == (tiny_gemma_dir / "model.safetensors",)
    assert folder.has_image_processor


def test_finds_the_single_model_folder_below_a_parent(gemma_copy, tmp_path):
    inner = gemma_copy("snapshots/abc123")
    assert locate_gemma_folder(tmp_path / "snapshots").root == inner


def test_several_model_folders_below_a_parent_are_ambiguous(gemma_copy, tmp_path):
    gemma_copy("many/a")
    gemma_copy("many/b")
    with pytest.raises(CheckpointError, match="several model folders"):
        locate_gemma_folder(tmp_path / "many")


def test_missing_path(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        locate_gemma_folder(tmp_path / "nowhere")


def test_file_instead_of_folder(tiny_gemma_dir):
    with pytest.raises(CheckpointError, match="is a file"):
        locate_gemma_folder(tiny_gemma_dir / "model.safetensors")


def test_folder_without_config(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        locate_gemma_folder(tmp_path)


@pytest.mark.parametrize(("model_type", "extra"), [("llama", ""), ("gemma3_text", "text-only")])
def test_other_model_types_are_rejected(gemma_copy, model_type, extra):
    folder = gemma_copy()
    _edit_config(folder, model_type=model_type)
    with pytest.raises(CheckpointError, match=f"{model_type!r}.*{extra}.*gemma3"):
        locate_gemma_folder(folder)


def test_missing_tokenizer(gemma_copy):
    folder = gemma_copy()
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no tokenizer"):
        locate_gemma_folder(folder)


def test_missing_weights(gemma_copy):
    folder = gemma_copy()
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights"):
        locate_gemma_folder(folder)


def test_missing_shard_of_an_index(gemma_copy):
    folder = gemma_copy()
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match="model-00002-of-00002"):
        locate_gemma_folder(folder)


def test_weights_that_do_not_fit_the_config_are_an_error(gemma_copy):
    folder = gemma_copy()
    tensors = load_file(str(folder / "model.safetensors"))
    dropped = next(k for k in tensors if "layers.0.mlp" in k)
    del tensors[dropped]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="do not fit"):
        GemmaTextEncoder.from_folder(folder, dtype=torch.float32, device="cpu")


@pytest.mark.slow
def test_released_key_layout_loads_the_same_weights(gemma_copy, tiny_gemma):
    """Released Gemma 3 folders store the vision tower under `vision_tower.vision_model.`."""
    folder = gemma_copy()
    tensors = load_file(str(folder / "model.safetensors"))
    renamed = {
        (k.replace("vision_tower.", "vision_tower.vision_model.", 1) if k.startswith("vision_tower.") else k): v
        for k, v in tensors.items()
    }
    assert renamed.keys() != tensors.keys()
    save_file(renamed, str(folder / "model.safetensors"), metadata={"format": "pt"})
    encoder = GemmaTextEncoder.from_folder(folder, dtype=torch.float32, device="cpu")
    want = tiny_gemma.model.state_dict()
    got = encoder.model.state_dict()
    assert got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_missing_tokenizer_config(gemma_copy):
    folder = gemma_copy()
    (folder / "tokenizer_config.json").unlink()
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        locate_gemma_folder(folder)
