"""Encoding prompts with a tiny random Gemma 3: all hidden states, masks, batching, release."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.loader import CheckpointError
from ltx_core.text_encoders.gemma import GemmaTextEncoder

PROMPTS = ["A chef slices onions on a wooden board.", "blurry, low quality"]


def test_every_hidden_state_is_returned(tiny_gemma, tiny_gemma_dir, short_length):
    text = json.loads((tiny_gemma_dir / "config.json").read_text())["text_config"]
    out = tiny_gemma.encode(PROMPTS)
    assert tiny_gemma.num_hidden_states == text["num_hidden_layers"] + 1 == len(out.hidden_states)
    assert tiny_gemma.hidden_size == text["hidden_size"]
    for h in out.hidden_states:
        assert h.shape == (len(PROMPTS), short_length, text["hidden_size"])
        assert torch.isfinite(h).all()
    assert torch.equal(out.attention_mask, tiny_gemma.tokenizer(PROMPTS).attention_mask)


def test_first_hidden_state_is_the_embedding_output(tiny_gemma):
    out = tiny_gemma.encode(PROMPTS[:1])
    ids = tiny_gemma.tokenizer(PROMPTS[:1]).input_ids
    embed = tiny_gemma.model.get_input_embeddings()
    with torch.no_grad():
        want = embed(ids)
    torch.testing.assert_close(out.hidden_states[0], want)
    assert not torch.allclose(out.hidden_states[1], want)


def test_encoding_is_deterministic(tiny_gemma):
    a, b = tiny_gemma.encode(PROMPTS), tiny_gemma.encode(PROMPTS)
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert torch.equal(x, y)


def test_batched_prompts_match_single_prompts(tiny_gemma):
    """Positive and negative share one forward; with left padding each row equals its own run."""
    batched = tiny_gemma.encode(PROMPTS)
    for row, prompt in enumerate(PROMPTS):
        single = tiny_gemma.encode([prompt])
        valid = single.attention_mask[0].bool()
        for b, s in zip(batched.hidden_states, single.hidden_states):
            torch.testing.assert_close(b[row, valid], s[0, valid], atol=1e-5, rtol=1e-5)


def test_dtype_and_device_are_honoured(tiny_gemma_dir):
    encoder = GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.bfloat16, device="cpu", max_length=16)
    out = encoder.encode(["a fox"])
    assert encoder.dtype == torch.bfloat16 and encoder.device.type == "cpu"
    assert all(h.dtype == torch.bfloat16 for h in out.hidden_states)
    encoder.release()


def test_release_frees_the_weights(tiny_gemma_dir):
    encoder = GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu", max_length=16)
    module = encoder.model
    encoder.release()
    assert encoder.is_released
    assert all(p.is_meta for p in module.parameters())
    with pytest.raises(RuntimeError, match="released"):
        encoder.encode(["a fox"])
    encoder.release()  # twice is harmless


def test_context_manager_releases(tiny_gemma_dir):
    with GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu", max_length=16) as encoder:
        encoder.encode(["a fox"])
    assert encoder.is_released


def test_processor_needs_its_config(gemma_copy):
    folder = gemma_copy()
    (folder / "processor_config.json").unlink()
    encoder = GemmaTextEncoder.from_folder(folder, dtype=torch.float32, device="cpu", max_length=16)
    with pytest.raises(CheckpointError, match="processor_config.json"):
        encoder.processor()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_encoding_and_release(tiny_gemma_dir):
    encoder = GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.bfloat16, device="cuda", max_length=128)
    out = encoder.encode(PROMPTS)
    assert all(h.is_cuda and h.dtype == torch.bfloat16 for h in out.hidden_states)
    assert out.attention_mask.is_cuda
    module = encoder.model
    encoder.release()
    assert all(p.is_meta for p in module.parameters())
