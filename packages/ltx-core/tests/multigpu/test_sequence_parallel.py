"""Sequence-parallel (Ulysses) forward over 2 and 3 gloo CPU processes equals the single-process forward."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from rank_jobs import sequence_parallel_forward_job

from ltx_core.model.transformer import Modality, ModelVariant, configure_transformer
from ltx_core.multigpu import SequenceParallelTransformer, check_heads_divide
from ltx_core.multigpu.launch import run_ranks

# Reuse the transformer tests' tiny config, with head counts that divide by 2 and by 3.
from ..transformer.conftest import TINY_TRANSFORMER, _positions, randomize_

# Six heads per stream (video 6 x 4, audio 6 x 2) so that 2 and 3 ranks both divide them.
SP_HEADS = {
    "num_attention_heads": 6, "attention_head_dim": 4, "cross_attention_dim": 24,
    "audio_num_attention_heads": 6, "audio_attention_head_dim": 2, "audio_cross_attention_dim": 12,
}  # fmt: skip
VIDEO_CONTEXT, AUDIO_CONTEXT = 24, 12
# The rest of the LTX-2.5 architecture flags (bias-free feed-forwards, no prompt AdaLN).
LTX25_FLAGS = {"ff_bias": False, "audio_ff_bias": False, "use_prompt_adaln_single": False}


def _model(**overrides):
    # With the LTX-2.5 keyframe embedding, so the masked cases also check the keyframes-mask sharding.
    overrides = {"use_keyframes_abs_pos_embedding": True, **overrides}
    config = {"transformer": {**copy.deepcopy(TINY_TRANSFORMER), **SP_HEADS, **overrides}}
    return randomize_(configure_transformer(config, ModelVariant.AUDIO_VIDEO), seed=3)


def _inputs(video_tokens: int, audio_tokens: int, masked: bool, seed: int) -> tuple[Modality, Modality]:
    g = torch.Generator().manual_seed(seed)
    batch = 2
    sigma = torch.tensor([0.8, 0.4])
    # Per-token timesteps that differ inside an item (a conditioned first frame), as image-to-video has.
    v_steps = sigma[:, None, None].expand(batch, video_tokens, 1).clone()
    v_steps[:, :2] = 0.0
    video = Modality(
        latent=torch.randn(batch, video_tokens, 16, generator=g),
        timesteps=v_steps,
        sigma=sigma.clone(),
        positions=_positions(batch, video_tokens, 3, 0.25),
        context=torch.randn(batch, 5, VIDEO_CONTEXT, generator=g),
        context_mask=torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]),
    )
    audio = Modality(
        latent=torch.randn(batch, audio_tokens, 8, generator=g),
        timesteps=sigma[:, None, None].expand(batch, audio_tokens, 1).clone(),
        sigma=sigma.clone(),
        positions=_positions(batch, audio_tokens, 1, 0.04),
        context=torch.randn(batch, 5, AUDIO_CONTEXT, generator=g),
    )
    if masked:
        weights = torch.rand(batch, video_tokens, video_tokens, generator=g)
        weights[weights < 0.3] = 0.0  # some pairs fully hidden
        weights[:, torch.arange(video_tokens), torch.arange(video_tokens)] = 1.0
        video = replace(video, attention_mask=weights)
        a_weights = torch.rand(batch, audio_tokens, audio_tokens, generator=g).clamp(min=0.1)
        audio = replace(audio, attention_mask=a_weights)
        video = replace(video, keyframes_mask=(torch.rand(batch, video_tokens, 1, generator=g) > 0.5).float())
    return video, audio


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, f"shape {tuple(a.shape)} != {tuple(b.shape)}"
    return float((a.double() - b.double()).abs().max())


# Each world size on one flag set (the runs are slow): 2 ranks with the LTX-2.3 flags, 3 with LTX-2.5's.
@pytest.mark.parametrize(("world", "flags"), [(2, {}), (3, LTX25_FLAGS)], ids=["2-ranks-ltx23", "3-ranks-ltx25"])
def test_sequence_parallel_forward_equals_single_process(world, flags, tmp_path):
    model = _model(**flags)
    assert (model.transformer_blocks[0].ff.net[2].bias is None) == bool(flags)
    # Token counts that divide by the world size (12 video, 6 audio) and that do not (13 / 7, 11 / 5).
    cases = [
        _inputs(12, 6, masked=False, seed=1),
        _inputs(13, 7, masked=False, seed=2),
        _inputs(12, 6, masked=True, seed=3),
        _inputs(11, 5, masked=True, seed=4),
    ]
    out_path = tmp_path / "sp.pt"
    run_ranks(sequence_parallel_forward_job, world, args=(model, cases, str(out_path)), timeout_s=120)
    parallel = torch.load(out_path)
    with torch.inference_mode():
        for (video, audio), (sp_v, sp_a) in zip(cases, parallel, strict=True):
            want_v, want_a = model(video, audio)
            assert _max_diff(sp_v, want_v) <= 1e-5
            assert _max_diff(sp_a, want_a) <= 1e-5


def test_padding_tokens_do_not_leak(tmp_path):
    """Guards the equality test itself: an SP run whose padding keys were NOT hidden would differ."""
    model = _model()
    video, audio = _inputs(13, 7, masked=False, seed=2)
    padded_v = replace(
        video,
        latent=torch.cat([video.latent, torch.zeros(2, 1, 16)], 1),
        timesteps=torch.cat([video.timesteps, video.timesteps[:, -1:]], 1),
        positions=torch.cat([video.positions, video.positions[:, :, -1:]], 2),
    )
    with torch.inference_mode():
        unpadded, _ = model(video, audio)
        leaked, _ = model(padded_v, audio)
    assert _max_diff(leaked[:, :13], unpadded) > 1e-4


def test_heads_not_dividing_world_size_is_a_clear_error():
    model = _model(audio_num_attention_heads=2, audio_attention_head_dim=6)
    with pytest.raises(ValueError, match="divisible by 3.*audio_attn1 has 2 heads"):
        check_heads_divide(model, 3)
    check_heads_divide(model, 2)


def test_single_process_wrapper_is_the_model():
    model = _model()
    video, audio = _inputs(12, 6, masked=False, seed=1)
    with torch.inference_mode():
        got = SequenceParallelTransformer(model)(video, audio)
        want = model(video, audio)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
