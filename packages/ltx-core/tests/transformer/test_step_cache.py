"""First-Block-Cache over successive transformer calls (`ltx_core.components.step_cache`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ltx_core.components.step_cache import StepCachedTransformer
from ltx_core.guidance.perturbations import (
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)
from ltx_core.model.transformer import X0Model


def _nudged(modality, scale: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    return replace(modality, latent=modality.latent + scale * torch.randn(modality.latent.shape, generator=g))


@torch.no_grad()
def test_tiny_threshold_never_reuses_and_matches_the_model(make_model, make_inputs, assert_close):
    model = make_model(num_layers=3).eval()
    cached = StepCachedTransformer(model, threshold=1e-12)
    video, audio = make_inputs()
    for step in range(3):
        v, a = _nudged(video, 0.1, step), _nudged(audio, 0.1, 10 + step)
        got, want = cached(v, a), model(v, a)
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])
    assert (cached.stats.calls, cached.stats.reused) == (3, 0)


@torch.no_grad()
def test_a_repeated_call_reuses_the_deep_residual_with_the_same_result(make_model, make_inputs, assert_close):
    model = make_model(num_layers=3).eval()
    cached = StepCachedTransformer(model, threshold=0.05)
    video, audio = make_inputs()
    first = cached(video, audio)
    calls = []
    hook = model.transformer_blocks[2].register_forward_hook(lambda *a: calls.append(1))
    again = cached(video, audio)  # block 0's residual unchanged: blocks 1..2 skipped
    hook.remove()
    assert calls == [] and cached.stats.reused == 1
    assert_close(again[0], first[0])
    assert_close(again[1], first[1])
    # A slightly moved input reuses too; its result differs from the full call by about that move.
    moved = cached(_nudged(video, 1e-3, 0), audio)
    full = model(_nudged(video, 1e-3, 0), audio)
    assert cached.stats.reused == 2
    assert float((moved[0] - full[0]).abs().max()) < 0.05 * float(full[0].abs().max())


@torch.no_grad()
def test_each_perturbation_layout_has_its_own_entry(make_model, make_inputs):
    model = make_model(num_layers=3).eval()
    cached = StepCachedTransformer(model, threshold=0.5)
    video, audio = make_inputs(batch=1)
    stg = BatchedPerturbationConfig((PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (1,)),)),))
    cached(video, audio)
    cached(video, audio, stg)  # the perturbed pass: first of its kind, computed in full
    assert (cached.stats.calls, cached.stats.reused) == (2, 0)
    cached(video, audio, stg)
    assert cached.stats.reused == 1


def test_works_under_x0_model_and_refuses_bad_settings(make_model, make_inputs):
    model = make_model(num_layers=2).eval()
    x0 = X0Model(StepCachedTransformer(model, threshold=0.1))
    assert x0.num_blocks == 2
    with torch.no_grad():
        x0(*make_inputs())
    with pytest.raises(ValueError, match="threshold must be > 0"):
        StepCachedTransformer(model, threshold=0.0)
    with pytest.raises(ValueError, match="at least 2 blocks"):
        StepCachedTransformer(make_model(num_layers=1), threshold=0.1)
