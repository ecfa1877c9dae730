"""The transformer's RMS norms (the blocks' AdaLN norms and the attention q/k norms) take the CPU path
the model's kernel choices give them (`ltx_core.tune.norm`), and the forward is the same on either."""

from __future__ import annotations

import torch

from ltx_core.tune import KernelChoices, attach
from ltx_core.tune import norm as norm_module


def test_every_norm_of_the_forward_takes_the_forced_mirrored_path(make_model, make_inputs, monkeypatch):
    model = make_model()
    video, audio = make_inputs()
    attach(model, KernelChoices.fixed({}))
    want = model(video, audio, None)
    widths = []
    real = norm_module.mirrored_rms_norm
    monkeypatch.setattr(
        norm_module, "mirrored_rms_norm", lambda x, eps, w=None: widths.append(x.shape[-1]) or real(x, eps, w)
    )
    attach(model, KernelChoices.fixed({"rms-norm": "mirrored"}))
    got = model(video, audio, None)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # Per block and stream: 3 AdaLN norms (self-attention, text query, feed-forward) and the q/k norms of
    # self-, text- and cross-modal attention; video width 16 (q/k 16), audio 8 (q/k 8).
    assert set(widths) == {16, 8}
    blocks = model.num_blocks
    assert len(widths) >= blocks * 2 * 3 + blocks * 4 * 2
