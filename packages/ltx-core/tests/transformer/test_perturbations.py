"""Attention perturbations inside one batched forward."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ltx_core.guidance.perturbations import (
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)
from ltx_core.model.transformer import Modality


def _item(mod: Modality, i: int) -> Modality:
    return replace(
        mod,
        latent=mod.latent[i : i + 1],
        timesteps=mod.timesteps[i : i + 1],
        sigma=mod.sigma[i : i + 1],
        positions=mod.positions[i : i + 1],
        context=mod.context[i : i + 1],
    )


def _repeat(mod: Modality, n: int) -> Modality:
    return replace(
        mod,
        latent=mod.latent.repeat(n, 1, 1),
        timesteps=mod.timesteps.repeat(n, 1, 1),
        sigma=mod.sigma.repeat(n),
        positions=mod.positions.repeat(n, 1, 1, 1),
        context=mod.context.repeat(n, 1, 1),
    )


STG = PerturbationConfig(
    (
        Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (1,)),
        Perturbation(PerturbationType.SKIP_AUDIO_SELF_ATTN, (1,)),
    )
)
ISOLATED = PerturbationConfig(
    (Perturbation(PerturbationType.SKIP_A2V_CROSS_ATTN), Perturbation(PerturbationType.SKIP_V2A_CROSS_ATTN))
)


def test_config_queries():
    batch = BatchedPerturbationConfig((PerturbationConfig.empty(), STG, ISOLATED))
    assert batch.any_skip(PerturbationType.SKIP_VIDEO_SELF_ATTN, 1)
    assert not batch.any_skip(PerturbationType.SKIP_VIDEO_SELF_ATTN, 0)
    assert not batch.all_skip(PerturbationType.SKIP_A2V_CROSS_ATTN, 0)
    keep = batch.keep_mask(PerturbationType.SKIP_A2V_CROSS_ATTN, 5, "cpu", torch.float32)
    assert keep.shape == (3, 1, 1) and keep.flatten().tolist() == [1.0, 1.0, 0.0]
    assert BatchedPerturbationConfig.empty(2).items == (PerturbationConfig(), PerturbationConfig())
    with pytest.raises(ValueError, match="PerturbationType"):
        Perturbation("skip_video_self_attn", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="block"):
        Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (-1,))


# CPU BLAS picks different kernels for different row counts, so a batch of 3 and a batch of 1 differ in
# the last bits even without perturbations. "Unchanged" is therefore checked bit-exactly against the
# same batch run without perturbations, and against the item run alone at float32 round-off.
_ROUND_OFF = {"atol": 1e-5, "rtol": 1e-5}


@pytest.mark.parametrize("perturbation", [STG, ISOLATED], ids=["stg", "isolated"])
def test_perturbed_item_differs_and_others_unchanged(make_model, make_inputs, perturbation, assert_close):
    model = make_model()
    video, audio = make_inputs(batch=1)
    video3, audio3 = _repeat(video, 3), _repeat(audio, 3)
    config = BatchedPerturbationConfig((PerturbationConfig.empty(), perturbation, PerturbationConfig.empty()))
    v_out, a_out = model(video3, audio3, config)
    v_plain, a_plain = model(video3, audio3)
    v_alone, a_alone = model(video, audio)
    v_pert, a_pert = model(video, audio, BatchedPerturbationConfig((perturbation,)))
    for i in (0, 2):  # unperturbed items
        assert torch.equal(v_out[i], v_plain[i]), f"video item {i} changed"
        assert torch.equal(a_out[i], a_plain[i]), f"audio item {i} changed"
        assert_close(v_out[i : i + 1], v_alone, **_ROUND_OFF)
        assert_close(a_out[i : i + 1], a_alone, **_ROUND_OFF)
    assert (v_out[1] - v_plain[1]).abs().max() > 1e-2 and (a_out[1] - a_plain[1]).abs().max() > 1e-2
    assert_close(v_out[1:2], v_pert, **_ROUND_OFF)
    assert_close(a_out[1:2], a_pert, **_ROUND_OFF)


def test_mixed_batch_of_different_items(make_model, make_inputs, assert_close):
    """Items with their own latents/sigmas: each output equals that item run alone."""
    model = make_model()
    video, audio = make_inputs(batch=2)
    config = BatchedPerturbationConfig((STG, PerturbationConfig.empty()))
    v_out, a_out = model(video, audio, config)
    v_plain, a_plain = model(video, audio)
    assert torch.equal(v_out[1], v_plain[1]) and torch.equal(a_out[1], a_plain[1])
    v1, a1 = model(_item(video, 1), _item(audio, 1))
    assert_close(v_out[1:2], v1, **_ROUND_OFF)
    assert_close(a_out[1:2], a1, **_ROUND_OFF)
    v0, a0 = model(_item(video, 0), _item(audio, 0), BatchedPerturbationConfig((STG,)))
    assert_close(v_out[0:1], v0, **_ROUND_OFF)
    assert_close(a_out[0:1], a0, **_ROUND_OFF)


def test_skipped_self_attention_is_gated_value_projection(make_model, make_inputs, assert_close):
    """With every item skipping, queries/keys are never computed, and attn1 returns to_out(gate * to_v(x))."""
    model = make_model(num_layers=1)
    video, audio = make_inputs(batch=2)
    attn = model.transformer_blocks[0].attn1
    calls = {"q": 0, "k": 0}
    handles = [
        attn.to_q.register_forward_hook(lambda *_: calls.__setitem__("q", calls["q"] + 1)),
        attn.to_k.register_forward_hook(lambda *_: calls.__setitem__("k", calls["k"] + 1)),
    ]
    seen = {}
    handles.append(
        attn.register_forward_hook(lambda mod, args, kwargs, out: seen.update(x=args[0], out=out), with_kwargs=True)
    )
    skip_all = BatchedPerturbationConfig(
        (PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN),)),) * 2
    )
    try:
        model(video, audio, skip_all)
    finally:
        for h in handles:
            h.remove()
    assert calls == {"q": 0, "k": 0}
    x = seen["x"]
    gates = 2 * torch.sigmoid(attn.to_gate_logits(x))
    v = attn.to_v(x).view(*x.shape[:2], attn.heads, attn.head_dim) * gates[..., None]
    assert_close(seen["out"], attn.to_out(v.flatten(2)))


def test_batch_size_mismatch_is_rejected(make_model, make_inputs):
    model = make_model()
    video, audio = make_inputs(batch=2)
    with pytest.raises(ValueError, match="items"):
        model(video, audio, BatchedPerturbationConfig.empty(3))
