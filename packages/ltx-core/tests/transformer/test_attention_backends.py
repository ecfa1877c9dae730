"""The attention seam: SDPA on CPU and for masked calls, numerically plain softmax attention."""

from __future__ import annotations

import torch

from ltx_core.model.transformer.attention_backends import AttentionBackend, attend, select_backend


def _naive(q, k, v, heads, bias=None):
    b, t, width = q.shape
    d = width // heads
    qh, kh, vh = (x.view(b, -1, heads, d).transpose(1, 2) for x in (q, k, v))
    scores = qh @ kh.transpose(-1, -2) / d**0.5
    if bias is not None:
        scores = scores + bias
    return (scores.softmax(-1) @ vh).transpose(1, 2).reshape(b, t, width)


def test_cpu_always_uses_sdpa():
    q = torch.randn(1, 4, 16, dtype=torch.bfloat16)
    assert select_backend(q, 2, masked=False) is AttentionBackend.SDPA
    assert select_backend(q, 2, masked=True) is AttentionBackend.SDPA


def test_attend_matches_softmax_attention(assert_close):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, 24, generator=g) for n in (5, 7, 7))
    assert_close(attend(q, k, v, 3), _naive(q, k, v, 3), atol=1e-5)
    bias = torch.zeros(2, 1, 1, 7)
    bias[0, ..., 5:] = -torch.finfo(torch.float32).max
    assert_close(attend(q, k, v, 3, bias), _naive(q, k, v, 3, bias), atol=1e-5)
    # masked keys carry no weight: changing them does not move the first item
    v2 = v.clone()
    v2[0, 5:] = 1000.0
    assert_close(attend(q, k, v2, 3, bias)[0], attend(q, k, v, 3, bias)[0])


def test_backends_are_chosen_by_name():
    from ltx_core.model.transformer.attention_backends import parse_backend

    assert parse_backend(None) is None and parse_backend("auto") is None
    assert parse_backend("sdpa") is AttentionBackend.SDPA
    assert parse_backend("flash3") is AttentionBackend.FLASH_ATTENTION_3
    assert parse_backend("FLASH4") is AttentionBackend.FLASH_ATTENTION_4
    assert parse_backend("mps-sdpa") is AttentionBackend.MPS_SDPA


def test_unknown_or_unusable_backends_fail_naming_what_they_need():
    import pytest

    from ltx_core.model.transformer.attention_backends import available_backends, check_backend

    with pytest.raises(ValueError, match="unknown attention backend 'xformers'.*accepted: auto, sdpa, flash3"):
        check_backend("xformers", "cpu")
    for name, backend in (("flash3", AttentionBackend.FLASH_ATTENTION_3), ("mps-sdpa", AttentionBackend.MPS_SDPA)):
        expected = "needs a CUDA GPU|needs an Apple MPS" if backend in available_backends() else "not installed"
        with pytest.raises(ValueError, match=expected):
            check_backend(name, "cpu")
    assert check_backend("sdpa", "cpu") is AttentionBackend.SDPA


def test_a_pinned_backend_is_set_on_every_attention_layer_and_logged(make_model, make_inputs, caplog):
    import logging

    from ltx_core.model.transformer.attention_backends import set_attention_backend

    model = make_model()
    video, audio = make_inputs()
    want = model(video, audio)
    with caplog.at_level(logging.INFO, logger="ltx_core.model.transformer.attention_backends"):
        set_attention_backend(model, "sdpa", "cpu")
        got = model(video, audio)
    attentions = [m for m in model.modules() if hasattr(m, "attention_fn")]
    assert attentions and all(m.attention_fn.keywords["backend"] is AttentionBackend.SDPA for m in attentions)
    assert any("attention backend" in r.getMessage() for r in caplog.records)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
