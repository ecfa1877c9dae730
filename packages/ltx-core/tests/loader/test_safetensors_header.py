from pathlib import Path

import pytest
import torch

from ltx_core.loader import CheckpointError, parse_model_version, read_checkpoint_config, read_safetensors_header


def test_header_lists_tensors_and_decodes_json_metadata(tiny_checkpoint):
    path, weights = tiny_checkpoint
    header = read_safetensors_header(path)
    assert set(header.tensors) == set(weights)
    assert header.tensors["net.proj.weight"].shape == (4, 4)
    assert header.tensors["net.proj.weight"].dtype == "BF16"
    assert header.metadata["config"] == {"tiny": {"width": 4, "out": 3}}
    # "2.3.0" is not JSON: it stays the raw string.
    assert header.metadata["model_version"] == "2.3.0"


def test_header_read_does_not_read_tensor_data(write_safetensors, monkeypatch):
    path = write_safetensors("big.safetensors", {"w": torch.zeros(256, 1024)}, {"config": {}})
    reads: list[int] = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        f = real_open(self, *args, **kwargs)
        real_read = f.read

        def read(n=-1):
            data = real_read(n)
            reads.append(len(data))
            return data

        f.read = read
        return f

    monkeypatch.setattr(Path, "open", counting_open)
    read_safetensors_header(path)
    assert sum(reads) < 4096 < path.stat().st_size


def test_missing_path_is_named(tmp_path):
    missing = tmp_path / "nope.safetensors"
    with pytest.raises(CheckpointError, match="not found.*nope.safetensors"):
        read_safetensors_header(missing)


def test_directory_is_rejected(tmp_path):
    with pytest.raises(CheckpointError, match="not a file"):
        read_safetensors_header(tmp_path)


def test_non_safetensors_file_is_rejected(tmp_path):
    bogus = tmp_path / "notes.safetensors"
    bogus.write_text("this is a text file, not a checkpoint at all")
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        read_safetensors_header(bogus)


def test_tiny_file_is_rejected(tmp_path):
    bogus = tmp_path / "tiny.safetensors"
    bogus.write_bytes(b"abc")
    with pytest.raises(CheckpointError, match="only 3 bytes"):
        read_safetensors_header(bogus)


def test_truncated_header_is_rejected(tiny_checkpoint, tmp_path):
    path, _ = tiny_checkpoint
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CheckpointError, match="truncated"):
        read_safetensors_header(cut)


def test_truncated_data_is_rejected(tiny_checkpoint, tmp_path):
    path, _ = tiny_checkpoint
    raw = path.read_bytes()
    cut = tmp_path / "cut_data.safetensors"
    cut.write_bytes(raw[:-16])
    with pytest.raises(CheckpointError, match="truncated"):
        read_safetensors_header(cut)


def test_config_section_errors_say_what_was_expected(write_safetensors):
    no_config = write_safetensors("lora.safetensors", {"a": torch.zeros(1)}, {"note": "hi"})
    with pytest.raises(CheckpointError, match="no 'config'.*expected an LTX checkpoint"):
        read_checkpoint_config(no_config, "transformer", expected_kind="an LTX checkpoint")
    flat = write_safetensors("up.safetensors", {"a": torch.zeros(1)}, {"config": {"_class_name": "LatentUpsampler"}})
    with pytest.raises(CheckpointError, match="no 'transformer' section"):
        read_checkpoint_config(flat, "transformer")
    assert read_checkpoint_config(flat) == {"_class_name": "LatentUpsampler"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2.3.0", (2, 3, 0)), ("2.3.rc1", (2, 3)), ("2", (2,)), (None, ()), ("", ()), ("beta", ())],
)
def test_parse_model_version(text, expected):
    assert parse_model_version(text) == expected
