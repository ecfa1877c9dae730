"""Prompts -> transformer text contexts: the tiny Gemma folder, plus a tiny checkpoint's text embeddings
stage (the same EmbeddingsProcessor the fx_text_embeddings parity test uses), both built in-process."""

from __future__ import annotations

import shutil

import pytest
import torch

from ltx_core.loader import CheckpointError, read_checkpoint_config
from ltx_core.text_encoders.gemma import (
    EnhancementSettings,
    GemmaTextEncoder,
    PromptEnhancement,
    build_text_embeddings,
    build_tiny_gemma_folder,
    context_row,
    encode_prompts,
    encode_text_prompts,
)

PROMPTS = ["Waves roll onto a pebble beach while gulls call overhead.", "blurry, distorted, low quality"]


@pytest.fixture(scope="module")
def full_length_gemma(tiny_gemma_dir):
    """Default (1024-token) contexts, like the pipelines."""
    return GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu")


@pytest.fixture(scope="module")
def embeddings(tiny_text_checkpoint, full_length_gemma):
    return build_text_embeddings(tiny_text_checkpoint, full_length_gemma, dtype=torch.float32, device="cpu")


def _expected_widths(checkpoint) -> tuple[int, int]:
    """Context widths the transformer takes: the attention widths when the text stage projects them
    (LTX-2.3 path, `caption_proj_before_connector`), else `caption_channels` for both modalities."""
    t = read_checkpoint_config(checkpoint, "transformer")
    if t.get("caption_proj_before_connector"):
        return t["cross_attention_dim"], t["audio_cross_attention_dim"]
    return t["caption_channels"], t["caption_channels"]


@pytest.mark.slow
def test_contexts_for_positive_and_negative_prompts(full_length_gemma, embeddings, tiny_text_checkpoint):
    contexts = encode_prompts(PROMPTS, full_length_gemma, embeddings)
    length = full_length_gemma.tokenizer.max_length
    video_width, audio_width = _expected_widths(tiny_text_checkpoint)
    assert contexts.video.shape == (len(PROMPTS), length, video_width)
    assert contexts.audio is not None and contexts.audio.shape == (len(PROMPTS), length, audio_width)
    assert contexts.mask.shape == (len(PROMPTS), length) and contexts.mask.dtype == torch.int64
    assert torch.isfinite(contexts.video).all() and torch.isfinite(contexts.audio).all()
    registers = read_checkpoint_config(tiny_text_checkpoint, "transformer").get("connector_num_learnable_registers", 0)
    if registers:  # padded slots hold learnable registers, so every slot is visible
        assert contexts.mask.eq(1).all()
    # Different prompts give different contexts.
    assert not torch.allclose(contexts.video[0], contexts.video[1])

    # The same code path as feeding Gemma's hidden states to the embeddings stage by hand.
    hidden = full_length_gemma.encode(PROMPTS)
    with torch.no_grad():
        by_hand = embeddings(list(hidden.hidden_states), hidden.attention_mask)
    torch.testing.assert_close(contexts.video, by_hand.video, atol=0, rtol=0)
    torch.testing.assert_close(contexts.audio, by_hand.audio, atol=0, rtol=0)

    # Batching positive and negative together changes nothing for either row.
    single = encode_prompts(PROMPTS[1:], full_length_gemma, embeddings)
    row = context_row(contexts, 1)
    torch.testing.assert_close(row.video, single.video, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(row.audio, single.audio, atol=1e-5, rtol=1e-5)
    assert torch.equal(row.mask, single.mask)


def test_context_row_bounds(full_length_gemma, embeddings):
    contexts = encode_prompts(PROMPTS[:1], full_length_gemma, embeddings)
    assert context_row(contexts, -1).video.shape == contexts.video.shape
    with pytest.raises(IndexError, match="out of range"):
        context_row(contexts, 1)


def test_gemma_of_the_wrong_width_does_not_fit_the_checkpoint(tiny_text_checkpoint, tiny_gemma_sizes, tmp_path):
    hidden, layers = tiny_gemma_sizes
    folder = build_tiny_gemma_folder(tmp_path / "narrow", hidden_size=hidden + 8, num_layers=layers)
    gemma = GemmaTextEncoder.from_folder(folder, dtype=torch.float32, device="cpu", max_length=128)
    # Either the connector width check (LTX-2 text path) or the loader's shape check (LTX-2.3) names it.
    with pytest.raises(CheckpointError, match="does not fit|do not fit"):
        build_text_embeddings(tiny_text_checkpoint, gemma, device="cpu")


@pytest.mark.slow
def test_one_call_encoding_with_enhancement(tiny_gemma_dir, tiny_text_checkpoint):
    result = encode_text_prompts(
        PROMPTS,
        gemma_root=tiny_gemma_dir,
        checkpoint=tiny_text_checkpoint,
        dtype=torch.float32,
        device="cpu",
        enhancement=PromptEnhancement(seed=1, settings=EnhancementSettings(max_new_tokens=4)),
        max_length=128,
    )
    assert len(result.prompts) == 2
    assert result.prompts[1] == PROMPTS[1]
    assert result.prompts[0] != PROMPTS[0] and result.prompts[0]
    video_width, audio_width = _expected_widths(tiny_text_checkpoint)
    assert result.contexts.video.shape == (2, 128, video_width)
    assert result.contexts.audio.shape == (2, 128, audio_width)


@pytest.mark.slow
def test_a_separate_enhancer_rewrites_the_prompt_the_text_encoder_could_not(
    tiny_gemma_dir, tiny_text_checkpoint, tmp_path
):
    # A text encoder without a chat template cannot rewrite prompts; a separate enhancer Gemma can.
    encoder_only = tmp_path / "encoder-only"
    shutil.copytree(tiny_gemma_dir, encoder_only)
    (encoder_only / "chat_template.jinja").unlink()
    settings = EnhancementSettings(max_new_tokens=4)
    options = {"gemma_root": encoder_only, "checkpoint": tiny_text_checkpoint, "dtype": torch.float32,
               "device": "cpu", "max_length": 128}  # fmt: skip
    with pytest.raises(ValueError, match="chat template"):
        encode_text_prompts(PROMPTS, enhancement=PromptEnhancement(seed=1, settings=settings), **options)
    enhanced = encode_text_prompts(
        PROMPTS, enhancement=PromptEnhancement(seed=1, settings=settings, gemma_root=tiny_gemma_dir), **options
    )
    same_gemma = encode_text_prompts(
        PROMPTS, enhancement=PromptEnhancement(seed=1, settings=settings), **{**options, "gemma_root": tiny_gemma_dir}
    )
    assert enhanced.prompts[0] == same_gemma.prompts[0] != PROMPTS[0]
    assert enhanced.prompts[1] == PROMPTS[1]


def test_a_resident_gemma_is_loaded_once_and_encodes_what_a_fresh_one_does(tiny_gemma_dir, tiny_text_checkpoint):
    """A warm worker's pool: Gemma is loaded on the first encoding and reused (not freed) by the next, and the
    contexts are bit-identical to loading and freeing it each time; `release` frees it."""
    from ltx_core.text_encoders.gemma.resident import ResidentTextEncoders

    options = dict(gemma_root=tiny_gemma_dir, checkpoint=tiny_text_checkpoint, dtype=torch.float32, device="cpu",
                   max_length=128)  # fmt: skip
    fresh = [encode_text_prompts([p], **options).contexts for p in PROMPTS]
    pool = ResidentTextEncoders()
    resident = [encode_text_prompts([p], resident=pool, **options).contexts for p in PROMPTS]
    assert pool.loads == 1
    for want, got in zip(fresh, resident, strict=True):
        assert torch.equal(want.video, got.video) and torch.equal(want.audio, got.audio)
        assert torch.equal(want.mask, got.mask)
    pool.release()  # freed: the next encoding loads it again
    encode_text_prompts([PROMPTS[0]], resident=pool, **options)
    assert pool.loads == 2
