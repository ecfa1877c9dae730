"""Context masks and self-attention masks."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from ltx_core.model.transformer.model import context_bias, self_attention_bias


def test_context_bias_values():
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    bias = context_bias(mask, torch.float32)
    assert bias.shape == (2, 1, 1, 3)
    assert bias[0, 0, 0, 0] == 0 and bias[0, 0, 0, 2] == -torch.finfo(torch.float32).max
    assert context_bias(None, torch.float32) is None


def test_self_attention_bias_is_log_weight(assert_close):
    mask = torch.tensor([[[1.0, 0.5], [0.0, 0.25]]])
    bias = self_attention_bias(mask, torch.float32)
    assert bias.shape == (1, 1, 2, 2)
    assert_close(bias[0, 0, 0], torch.tensor([0.0, math.log(0.5)]))
    assert bias[0, 0, 1, 0] == torch.finfo(torch.float32).min
    assert_close(bias[0, 0, 1, 1], torch.tensor(math.log(0.25)))


def test_masked_context_tokens_have_no_effect(make_model, make_inputs, assert_close):
    model = make_model()
    video, audio = make_inputs(batch=2, context_len=6)
    keep = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]])
    masked_v, masked_a = replace(video, context_mask=keep), replace(audio, context_mask=keep)
    out = model(masked_v, masked_a)
    # Change only the hidden context tokens: the outputs must not move.
    hidden = (keep == 0)[:, :, None]
    changed_v = replace(masked_v, context=torch.where(hidden, 100.0, video.context))
    changed_a = replace(masked_a, context=torch.where(hidden, -50.0, audio.context))
    again = model(changed_v, changed_a)
    assert_close(again[0], out[0])
    assert_close(again[1], out[1])
    # Without the mask they do matter.
    unmasked = model(video, audio)
    assert not torch.allclose(unmasked[0], out[0])


def test_all_ones_context_mask_equals_no_mask(make_model, make_inputs, assert_close):
    model = make_model()
    video, audio = make_inputs(batch=1)
    ones = torch.ones(video.context.shape[:2], dtype=torch.int64)
    a = model(video, audio)
    b = model(replace(video, context_mask=ones), replace(audio, context_mask=ones))
    assert_close(a[0], b[0])
    assert_close(a[1], b[1])


def test_self_attention_mask(make_model, make_inputs, assert_close):
    model = make_model()
    video, audio = make_inputs(batch=1, video_tokens=8)
    t = video.latent.shape[1]
    base = model(video, audio)[0]
    ones = model(replace(video, attention_mask=torch.ones(1, t, t)), audio)[0]
    assert_close(ones, base)
    # Block-diagonal mask: the two halves of the video tokens cannot see each other in self-attention.
    half = t // 2
    blocks = torch.zeros(1, t, t)
    blocks[:, :half, :half] = 1
    blocks[:, half:, half:] = 1
    masked = model(replace(video, attention_mask=blocks), audio)[0]
    assert not torch.allclose(masked, base)
    # Partial weights lie between: 0.5 everywhere off-diagonal differs from both.
    soft = torch.where(blocks > 0, 1.0, 0.5)
    partial = model(replace(video, attention_mask=soft), audio)[0]
    assert not torch.allclose(partial, base) and not torch.allclose(partial, masked)
