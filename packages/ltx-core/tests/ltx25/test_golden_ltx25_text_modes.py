"""The LTX-2.5 text path (packed Gemma 4 file of the golden set -> contexts) under the low-memory
text-encoder modes: streamed layers give exactly the full load's contexts (and so the reference's, within
the README tolerance); fp8 layer weights stay within `FP8_CONTEXT_RTOL` of the full load."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import Component
from ltx_core.text_encoders.gemma import GemmaTextEncoder, build_text_embeddings, contexts_from_hidden_states
from ltx_core.text_encoders.gemma.modes import FP8_CONTEXT_RTOL

pytestmark = pytest.mark.golden


def _contexts(fx, files, mode: str):
    prompts = list(fx.params["text.prompts"])
    path = files.source(Component.TEXT_ENCODER).path
    max_length = fx.params["text.tokenizer_max_length"]
    with GemmaTextEncoder.load(path, dtype=torch.float32, device="cpu", max_length=max_length, mode=mode) as gemma:
        hidden = gemma.encode(prompts)
        processor = build_text_embeddings(files, gemma, dtype=torch.float32, device="cpu")
    return hidden, contexts_from_hidden_states(hidden, processor)


@pytest.fixture(scope="module")
def full_run(golden_ltx25_fixture, ltx25_files):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    return fx, _contexts(fx, ltx25_files, "full")


@pytest.mark.parametrize("mode", ["stream-ram", "stream-disk"])
def test_streamed_gemma4_matches_the_full_load_exactly(full_run, ltx25_files, assert_golden_close, mode):
    fx, (want_hidden, want) = full_run
    hidden, contexts = _contexts(fx, ltx25_files, mode)
    assert all(torch.equal(a, b) for a, b in zip(hidden.hidden_states, want_hidden.hidden_states, strict=True))
    assert torch.equal(contexts.video, want.video) and torch.equal(contexts.audio, want.audio)
    assert_golden_close(contexts.video, fx["text.video_encoding"], name="video_encoding")
    assert_golden_close(contexts.audio, fx["text.audio_encoding"], name="audio_encoding")


def test_fp8_gemma4_contexts_stay_within_the_bound(full_run, ltx25_files):
    fx, (_, want) = full_run
    _, contexts = _contexts(fx, ltx25_files, "fp8")
    for name in ("video", "audio"):
        got, ref = getattr(contexts, name).float(), getattr(want, name).float()
        error = float((got - ref).norm() / ref.norm())
        print(f"fp8 gemma4 {name} relative error {error:.4f}")
        assert 0 < error < FP8_CONTEXT_RTOL, f"{name}: relative error {error:.4f}"
