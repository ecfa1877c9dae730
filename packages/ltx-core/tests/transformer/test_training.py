"""Gradients flow through the model, identically with block checkpointing."""

from __future__ import annotations

import pytest
import torch


# torch.utils.checkpoint imports sympy on first use (~10 s on 2 cores).
@pytest.mark.slow
def test_gradient_checkpointing_gives_the_same_gradients(make_model, make_inputs, assert_close):
    model = make_model(num_layers=2).train().requires_grad_(True)
    video, audio = make_inputs(batch=1)

    def grads() -> dict[str, torch.Tensor]:
        model.zero_grad()
        v, a = model(video, audio)
        (v.square().mean() + a.square().mean()).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    plain = grads()
    model.set_gradient_checkpointing(True)
    checkpointed = grads()
    assert plain.keys() == checkpointed.keys() and len(plain) > 50
    for name, g in plain.items():
        assert_close(checkpointed[name], g, atol=1e-6, rtol=1e-5)
