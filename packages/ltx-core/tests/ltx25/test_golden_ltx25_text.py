"""Parity of the LTX-2.5 text path with the reference: prompt -> token ids (packed tokenizer) ->
Gemma 4 hidden states (packed file) -> video / audio contexts (text embeddings of the split set)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import Component
from ltx_core.text_encoders.gemma import GemmaTextEncoder, build_text_embeddings, contexts_from_hidden_states

pytestmark = pytest.mark.golden
# The diffusers-folder component of `ltx25_model_source`: the text connectors and projection it builds.
DIFFUSERS_COMPONENTS = ("connectors",)


def test_ltx25_text_path_matches_reference(golden_ltx25_fixture, ltx25_files, ltx25_model_source, assert_golden_close):
    """Gemma 4 from the packed file; the text embeddings from the split set, or from the diffusers folder's
    `connectors/` (its projection and connectors, with the zero FFN biases diffusers fills in)."""
    fx = golden_ltx25_fixture("fx_ltx25_components")
    prompts = list(fx.params["text.prompts"])
    gemma = GemmaTextEncoder.load(
        ltx25_files.source(Component.TEXT_ENCODER).path,
        dtype=torch.float32,
        device="cpu",
        max_length=fx.params["text.tokenizer_max_length"],
    )
    with gemma:
        tokens = gemma.tokenizer(prompts)
        assert torch.equal(tokens.input_ids, fx["text.input_ids"])
        assert torch.equal(tokens.attention_mask, fx["text.attention_mask"])
        assert tokens.attention_mask.sum(dim=1).tolist() == fx.params["text.valid_tokens"]
        hidden = gemma.encode(prompts)
        processor = build_text_embeddings(ltx25_model_source, gemma, dtype=torch.float32, device="cpu")
    assert_golden_close(torch.stack(hidden.hidden_states), fx["text.hidden_states"], name="hidden_states")
    contexts = contexts_from_hidden_states(hidden, processor)
    assert_golden_close(contexts.video, fx["text.video_encoding"], name="video_encoding")
    assert_golden_close(contexts.audio, fx["text.audio_encoding"], name="audio_encoding")
    assert torch.equal(contexts.mask.to(torch.int64), fx["text.output_attention_mask"])
