"""The packed Gemma 4 text-encoder file: written by our tiny packer, read back through transformers'
Gemma 4 classes; errors for files that are not one. No golden files."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.loader import CheckpointError
from ltx_core.text_encoders.gemma import GemmaTextEncoder, read_packed_gemma
from ltx_core.text_encoders.gemma.tiny_packed import TINY_GEMMA4_VERSION, build_tiny_packed_gemma4


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    written: list = []
    path = build_tiny_packed_gemma4(
        tmp_path_factory.mktemp("g4") / "gemma4.safetensors", projection_widths=(8, 4), model_out=written
    )
    return path, written[0]


def test_packed_file_encodes_like_the_model_it_was_written_from(packed):
    path, source = packed
    info = read_packed_gemma(path)
    assert info.gemma_version == TINY_GEMMA4_VERSION and info.comfy_flat and info.num_hidden_states == 3
    with GemmaTextEncoder.load(path, dtype=torch.float32, device="cpu", max_length=64) as gemma:
        assert gemma.hidden_size == 16 and gemma.num_hidden_states == 3
        tokens = gemma.tokenizer(["A red fox trots across a snowy field", "waves"])
        first_real = tokens.attention_mask.argmax(dim=1)
        assert tokens.input_ids[torch.arange(2), first_real].tolist() == [gemma.tokenizer.bos_id] * 2
        assert tokens.attention_mask[:, 0].tolist() == [0, 0] and tokens.attention_mask[:, -1].tolist() == [1, 1]
        hidden = gemma.encode(["A red fox trots across a snowy field", "waves"])
    # The written weights are bfloat16: round the source's stored tensors the same way (computed
    # buffers, rotary frequencies and the embedding scale, stay float32 on both sides).
    reference = source
    with torch.no_grad():
        for tensor in reference.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.bfloat16().float())
    with torch.inference_mode():
        want = reference.model(
            input_ids=tokens.input_ids, attention_mask=tokens.attention_mask, output_hidden_states=True, use_cache=False
        ).hidden_states
    assert len(hidden.hidden_states) == len(want) == 3
    for got, expected in zip(hidden.hidden_states, want):
        assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_packed_file_has_no_image_processor(packed):
    path, _ = packed
    with (
        GemmaTextEncoder.load(path, dtype=torch.float32, device="cpu") as gemma,
        pytest.raises(CheckpointError, match="no image processor"),
    ):
        gemma.processor()


def test_files_that_are_not_packed_encoders_are_refused(tmp_path):
    plain = tmp_path / "plain.safetensors"
    save_file({"x": torch.zeros(1)}, str(plain))
    with pytest.raises(CheckpointError, match="no 'gemma_config' metadata.*packed Gemma 4"):
        read_packed_gemma(plain)
    other = tmp_path / "other.safetensors"
    save_file(
        {"tokenizer_json": torch.zeros(1, dtype=torch.uint8)},
        str(other),
        {"gemma_config": json.dumps({"model_type": "llama"})},
    )
    with pytest.raises(CheckpointError, match="'llama'.*gemma4_unified"):
        read_packed_gemma(other)
    with pytest.raises(ValueError, match="8-bit loading is for Gemma 3 folders"):
        GemmaTextEncoder.from_packed_file(other, load_in_8bit=True)
