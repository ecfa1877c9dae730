"""Prompt tokenisation: fixed length, left padding, a leading <bos>, no <eos>."""

from __future__ import annotations

import logging

import pytest
import torch

from ltx_core.text_encoders.gemma import DEFAULT_MAX_LENGTH, GemmaPromptTokenizer


@pytest.fixture(scope="module")
def hf_tokenizer(tiny_gemma_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_gemma_dir, local_files_only=True)


def test_default_length_is_the_ltx_context_length(hf_tokenizer):
    tokens = GemmaPromptTokenizer(hf_tokenizer)(["a fox"])
    assert DEFAULT_MAX_LENGTH == 1024
    assert tokens.input_ids.shape == tokens.attention_mask.shape == (1, 1024)


def test_left_padding_bos_and_no_eos(hf_tokenizer):
    prompts = ["A red fox trots across a snowy field.", "rain"]
    tokens = GemmaPromptTokenizer(hf_tokenizer, max_length=64)(prompts)
    assert tokens.input_ids.dtype == tokens.attention_mask.dtype == torch.int64
    for row, prompt in enumerate(prompts):
        want = hf_tokenizer(prompt)["input_ids"]
        assert want[0] == hf_tokenizer.bos_token_id
        n = len(want)
        mask = tokens.attention_mask[row]
        assert mask[: 64 - n].eq(0).all() and mask[64 - n :].eq(1).all()
        assert tokens.input_ids[row, 64 - n :].tolist() == want
        assert tokens.input_ids[row, : 64 - n].eq(hf_tokenizer.pad_token_id).all()
        assert hf_tokenizer.eos_token_id not in tokens.input_ids[row, 64 - n :].tolist()


def test_prompts_are_stripped(hf_tokenizer):
    tok = GemmaPromptTokenizer(hf_tokenizer, max_length=32)
    a, b = tok(["  a quiet lake \n"]), tok(["a quiet lake"])
    assert torch.equal(a.input_ids, b.input_ids)


def test_empty_prompt_is_just_bos(hf_tokenizer):
    tokens = GemmaPromptTokenizer(hf_tokenizer, max_length=16)([""])
    assert tokens.attention_mask.sum() == 1
    assert tokens.input_ids[0, -1] == hf_tokenizer.bos_token_id


def test_long_prompts_are_cut_with_a_warning(hf_tokenizer, caplog):
    long_prompt = " ".join(["waves roll onto a pebble beach"] * 20)
    with caplog.at_level(logging.WARNING):
        tokens = GemmaPromptTokenizer(hf_tokenizer, max_length=16)([long_prompt])
    assert tokens.attention_mask.eq(1).all()
    assert tokens.input_ids[0, 0] == hf_tokenizer.bos_token_id
    assert tokens.input_ids[0].tolist() == hf_tokenizer(long_prompt)["input_ids"][:16]
    assert "only the first 16" in caplog.text


class _BareTokenizer:
    """A tokenizer that adds no special tokens and has no pad token."""

    bos_token_id = 7
    eos_token_id = 9
    pad_token_id = None

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


def test_bos_is_prepended_and_eos_pads_when_there_is_no_pad_token():
    tokens = GemmaPromptTokenizer(_BareTokenizer(), max_length=6)(["ab"])
    assert tokens.input_ids.tolist() == [[9, 9, 9, 7, ord("a"), ord("b")]]
    assert tokens.attention_mask.tolist() == [[0, 0, 0, 1, 1, 1]]


def test_tokenizer_without_bos_is_rejected():
    class NoBos(_BareTokenizer):
        bos_token_id = None

    with pytest.raises(ValueError, match="bos"):
        GemmaPromptTokenizer(NoBos())


def test_bad_inputs(hf_tokenizer):
    tok = GemmaPromptTokenizer(hf_tokenizer, max_length=8)
    with pytest.raises(ValueError, match="no prompts"):
        tok([])
    with pytest.raises(TypeError, match="strings"):
        tok([1])
    with pytest.raises(ValueError, match="max_length"):
        GemmaPromptTokenizer(hf_tokenizer, max_length=1)
    assert tok("one prompt").input_ids.shape == (1, 8)
