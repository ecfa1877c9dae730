"""Prompt enhancement with a tiny random Gemma 3 (text-to-video and image-to-video)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from ltx_core.loader import CheckpointError
from ltx_core.text_encoders.gemma import (
    IMAGE_TO_VIDEO,
    TEXT_TO_VIDEO,
    EnhancementSettings,
    GemmaTextEncoder,
    clean_enhanced_prompt,
    enhance_prompt,
)

FEW_TOKENS = EnhancementSettings(max_new_tokens=4)


@pytest.fixture
def generate_spy(tiny_gemma, monkeypatch):
    """Records the keyword arguments of every generate call, then runs the real generate."""
    calls = []
    real = tiny_gemma.model.generate

    def spy(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(tiny_gemma.model, "generate", spy)
    return calls


def _decoded(gemma, ids):
    return gemma.tokenizer.tokenizer.decode(ids[0], skip_special_tokens=False)


@pytest.mark.slow
def test_t2v_returns_text_and_is_seeded(tiny_gemma):
    first = enhance_prompt(tiny_gemma, "a cat on a windowsill", seed=3, settings=FEW_TOKENS)
    again = enhance_prompt(tiny_gemma, "a cat on a windowsill", seed=3, settings=FEW_TOKENS)
    assert isinstance(first, str) and first
    assert first == again
    # Four tokens sampled from a random model: another seed practically never gives the same text.
    assert enhance_prompt(tiny_gemma, "a cat on a windowsill", seed=4, settings=FEW_TOKENS) != first


def test_global_rng_is_left_alone(tiny_gemma):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    enhance_prompt(tiny_gemma, "a cat", seed=0, settings=FEW_TOKENS)
    assert torch.equal(torch.get_rng_state(), state)


def test_t2v_chat_holds_the_instructions_and_the_prompt(tiny_gemma, generate_spy):
    enhance_prompt(tiny_gemma, "a fox in the snow", settings=FEW_TOKENS)
    (call,) = generate_spy
    text = _decoded(tiny_gemma, call["input_ids"])
    assert TEXT_TO_VIDEO.strip()[:60] in text
    assert "a fox in the snow" in text
    assert text.rstrip().endswith("<start_of_turn>model")
    assert "pixel_values" not in call
    assert call["max_new_tokens"] == 4 and call["do_sample"] and call["temperature"] == pytest.approx(0.7)


def test_inputs_are_left_padded_to_the_length_multiple(tiny_gemma, generate_spy):
    enhance_prompt(tiny_gemma, "a fox", settings=EnhancementSettings(max_new_tokens=2, length_multiple=16))
    (call,) = generate_spy
    ids, mask = call["input_ids"], call["attention_mask"]
    assert ids.shape[1] % 16 == 0
    pad = int((mask[0] == 0).sum())
    assert mask[0, :pad].eq(0).all() and mask[0, pad:].eq(1).all()
    assert ids[0, :pad].eq(tiny_gemma.tokenizer.pad_id).all()


def test_i2v_shows_the_image_to_gemma(tiny_gemma, tiny_gemma_dir, generate_spy):
    pixels = torch.randint(0, 256, (40, 56, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    out = enhance_prompt(tiny_gemma, "make the bird fly away", pixels, settings=FEW_TOKENS)
    assert isinstance(out, str) and out
    (call,) = generate_spy
    config = json.loads((tiny_gemma_dir / "config.json").read_text())
    vision = config["vision_config"]
    assert call["pixel_values"].shape == (1, 3, vision["image_size"], vision["image_size"])
    assert int((call["input_ids"] == config["image_token_index"]).sum()) == config["mm_tokens_per_image"]
    text = _decoded(tiny_gemma, call["input_ids"])
    assert IMAGE_TO_VIDEO.strip()[:60] in text and "make the bird fly away" in text


def test_image_layouts_give_the_same_pixels(tiny_gemma, monkeypatch):
    calls = []
    eos = tiny_gemma.tokenizer.tokenizer.eos_token_id

    def no_generation(**kwargs):
        calls.append(kwargs)
        return torch.cat([kwargs["input_ids"], torch.tensor([[eos]])], dim=1)

    monkeypatch.setattr(tiny_gemma.model, "generate", no_generation)
    pixels = np.random.default_rng(0).integers(0, 256, size=(40, 56, 3), dtype=np.uint8)
    layouts = [pixels, torch.from_numpy(pixels), torch.from_numpy(pixels).permute(2, 0, 1), Image.fromarray(pixels)]
    for image in layouts:
        enhance_prompt(tiny_gemma, "a fox", image, settings=FEW_TOKENS)
    first = calls[0]["pixel_values"]
    for call in calls[1:]:
        torch.testing.assert_close(call["pixel_values"], first, atol=0, rtol=0)


def test_custom_system_prompt(tiny_gemma, generate_spy):
    enhance_prompt(tiny_gemma, "a fox", system_prompt="Answer in one word.", settings=FEW_TOKENS)
    assert "Answer in one word." in _decoded(tiny_gemma, generate_spy[0]["input_ids"])


def test_empty_generation_keeps_the_original_prompt(tiny_gemma, monkeypatch):
    eos = tiny_gemma.tokenizer.tokenizer.eos_token_id
    monkeypatch.setattr(
        tiny_gemma.model, "generate", lambda **kw: torch.cat([kw["input_ids"], torch.tensor([[eos]])], dim=1)
    )
    assert enhance_prompt(tiny_gemma, "a fox", settings=FEW_TOKENS) == "a fox"


def test_without_processor_files_t2v_works_and_i2v_explains(gemma_copy):
    folder = gemma_copy()
    (folder / "processor_config.json").unlink()
    encoder = GemmaTextEncoder.from_folder(folder, dtype=torch.float32, device="cpu", max_length=16)
    assert enhance_prompt(encoder, "a fox", settings=FEW_TOKENS)
    with pytest.raises(CheckpointError, match="image processor"):
        enhance_prompt(encoder, "a fox", torch.zeros(8, 8, 3, dtype=torch.uint8), settings=FEW_TOKENS)


def test_bad_requests(tiny_gemma):
    with pytest.raises(ValueError, match="non-empty"):
        enhance_prompt(tiny_gemma, "   ")
    with pytest.raises(ValueError, match="uint8"):
        enhance_prompt(tiny_gemma, "a fox", torch.rand(8, 8, 3), settings=FEW_TOKENS)
    with pytest.raises(ValueError, match="max_new_tokens"):
        EnhancementSettings(max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        EnhancementSettings(temperature=0.0)
    assert EnhancementSettings(do_sample=False, temperature=0.0).generate_kwargs() == {
        "max_new_tokens": 512,
        "do_sample": False,
    }


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\u201cStyle: cinematic\u201d", 'Style: cinematic"'),
        ("  - A man\u2019s hat \u2014 blue", "A man's hat - blue"),
        ("** 1. Rain", "Rain"),
        ("...", "..."),
        ("", ""),
    ],
)
def test_clean_enhanced_prompt(raw, clean):
    assert clean_enhanced_prompt(raw) == clean


def test_release_settings_per_gemma_family(tiny_gemma):
    """Gemma 3 samples (T 0.7, 512 tokens); a Gemma 4 enhancer decodes greedily (600 tokens, no repeated 5-gram)."""
    assert EnhancementSettings.for_model_type("gemma3").generate_kwargs() == {
        "max_new_tokens": 512,
        "do_sample": True,
        "temperature": 0.7,
    }
    assert EnhancementSettings.for_model_type("gemma4").generate_kwargs() == {
        "max_new_tokens": 600,
        "do_sample": False,
        "no_repeat_ngram_size": 5,
    }
    assert tiny_gemma.model_type == "gemma3"
    with pytest.raises(ValueError, match="no_repeat_ngram_size"):
        EnhancementSettings(no_repeat_ngram_size=0)
