"""Conditioning items: which tokens change, masks, positions, attention masks, errors."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.noisers import add_noise
from ltx_core.conditioning import (
    AudioConditionByMask,
    AudioConditionByReferenceLatent,
    ConditioningError,
    FrozenModality,
    TemporalRegionMask,
    VideoConditionByKeyframeIndex,
    VideoConditionByLatentIndex,
    VideoConditionByMask,
    VideoConditionByReferenceLatent,
    apply_conditionings,
    extend_attention_mask,
)
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape

FPS = 24.0
C = 8  # small channel count keeps the tensors tiny


@pytest.fixture
def video_tools() -> VideoLatentTools:
    return VideoLatentTools(VideoLatentShape(1, C, 3, 2, 3), fps=FPS)  # 17 pixel frames, 64 x 96 px


@pytest.fixture
def audio_tools() -> AudioLatentTools:
    return AudioLatentTools(AudioLatentShape(1, 2, 6, 4))


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_latent_index_replaces_clean_tokens_of_one_frame(video_tools):
    state = video_tools.create_initial_state()
    image = _rand(1, C, 1, 2, 3)
    out = VideoConditionByLatentIndex(image, strength=0.8, latent_idx=1).apply_to(state, video_tools)
    per = video_tools.tokens_per_latent_frame
    frame = slice(per, 2 * per)
    torch.testing.assert_close(out.clean_latent[:, frame], video_tools.patchify(image))
    torch.testing.assert_close(out.denoise_mask[:, frame], torch.full((1, per, 1), 0.2))
    assert torch.equal(out.denoise_mask[:, :per], torch.ones(1, per, 1))
    assert torch.equal(out.clean_latent[:, :per], state.clean_latent[:, :per])
    assert torch.equal(out.latent, state.latent)  # the noiser does the blending
    assert out.token_count == state.token_count
    assert torch.equal(state.denoise_mask, torch.ones_like(state.denoise_mask))  # input state untouched


def test_image_at_frame_zero_survives_noising(video_tools):
    state = video_tools.create_initial_state()
    image = _rand(1, C, 1, 2, 3)
    state = VideoConditionByLatentIndex(image, strength=1.0).apply_to(state, video_tools)
    noisy = add_noise(state, _rand(*state.latent.shape, seed=1), 1.0)
    per = video_tools.tokens_per_latent_frame
    torch.testing.assert_close(noisy.latent[:, :per], video_tools.patchify(image))


def test_latent_index_errors(video_tools):
    state = video_tools.create_initial_state()
    with pytest.raises(ConditioningError, match="height"):
        VideoConditionByLatentIndex(_rand(1, C, 1, 4, 3), 1.0).apply_to(state, video_tools)
    with pytest.raises(ConditioningError, match="outside"):
        VideoConditionByLatentIndex(_rand(1, C, 2, 2, 3), 1.0, latent_idx=2).apply_to(state, video_tools)
    with pytest.raises(ValueError, match="strength"):
        VideoConditionByLatentIndex(_rand(1, C, 1, 2, 3), 1.5).apply_to(state, video_tools)


def test_keyframe_appends_tokens_with_shifted_positions(video_tools):
    state = video_tools.create_initial_state()
    key = _rand(1, C, 1, 2, 3)
    out = VideoConditionByKeyframeIndex(key, frame_idx=12, strength=0.9).apply_to(state, video_tools)
    n, m = state.token_count, 6
    assert out.token_count == n + m
    assert torch.equal(out.latent[:, :n], state.latent) and torch.equal(out.latent[:, n:], torch.zeros(1, m, C))
    torch.testing.assert_close(out.clean_latent[:, n:], video_tools.patchify(key))
    torch.testing.assert_close(out.denoise_mask[:, n:], torch.full((1, m, 1), 0.1))
    time = out.positions[0, 0, n:]
    torch.testing.assert_close(time, torch.tensor([[12 / FPS, 13 / FPS]]).expand(m, 2))  # single frame [12, 13)
    torch.testing.assert_close(out.positions[:, 1:, n:], state.positions[:, 1:, :m])  # same pixel grid
    assert out.attention_mask is None
    cleared = video_tools.clear_conditioning(out)
    assert cleared.token_count == n


def test_keyframe_at_frame_zero_keeps_causal_fix_and_multi_frame_span(video_tools):
    state = video_tools.create_initial_state()
    clip = _rand(1, C, 2, 2, 3)
    out = VideoConditionByKeyframeIndex(clip, frame_idx=0, num_pixel_frames=9).apply_to(state, video_tools)
    time = out.positions[0, 0, state.token_count :]
    torch.testing.assert_close(time[0], torch.tensor([0.0, 1 / FPS]))
    torch.testing.assert_close(time[6], torch.tensor([1 / FPS, 9 / FPS]))
    later = VideoConditionByKeyframeIndex(clip, frame_idx=8, num_pixel_frames=9).apply_to(state, video_tools)
    time = later.positions[0, 0, state.token_count :]
    torch.testing.assert_close(time[0], torch.tensor([8 / FPS, 16 / FPS]))  # no causal fix away from 0
    with pytest.raises(ConditioningError, match="frame_idx"):
        VideoConditionByKeyframeIndex(clip, frame_idx=17).apply_to(state, video_tools)


def test_reference_video_positions_scaled(video_tools):
    state = video_tools.create_initial_state()
    ref = _rand(1, C, 3, 1, 2)  # half resolution reference
    out = VideoConditionByReferenceLatent(ref, downscale_factor=2).apply_to(state, video_tools)
    n = state.token_count
    pos = out.positions[0, :, n:]
    torch.testing.assert_close(pos[1, 0], torch.tensor([0.0, 64.0]))
    torch.testing.assert_close(pos[2, 1], torch.tensor([64.0, 128.0]))
    torch.testing.assert_close(pos[0, 2], torch.tensor([1 / FPS, 9 / FPS]))  # frame 1 at the target's rate
    torch.testing.assert_close(out.denoise_mask[:, n:], torch.zeros(1, 6, 1))


def test_reference_video_temporal_scale_aligns_the_end(video_tools):
    state = video_tools.create_initial_state()
    ref = _rand(1, C, 1, 2, 3)
    # Two latent frames at fps / 4: pixel frames [0, 1) and [1, 9) at 6 fps, shifted back 3 target frames.
    out = VideoConditionByReferenceLatent(_rand(1, C, 2, 2, 3), temporal_scale_factor=4).apply_to(state, video_tools)
    time = out.positions[0, 0, state.token_count :]
    torch.testing.assert_close(time[0], torch.tensor([0.0, 1 / FPS]))  # [-3, 1) frames, start clamped at 0
    torch.testing.assert_close(time[6], torch.tensor([4 / FPS - 3 / FPS, 36 / FPS - 3 / FPS]))
    single = VideoConditionByReferenceLatent(ref).apply_to(state, video_tools)
    torch.testing.assert_close(single.positions[0, 0, state.token_count], torch.tensor([0.0, 1 / FPS]))


def test_attention_strength_builds_block_mask(video_tools):
    state = video_tools.create_initial_state()
    n = state.token_count
    out = VideoConditionByReferenceLatent(_rand(1, C, 1, 2, 3), attention_strength=0.3).apply_to(state, video_tools)
    mask = out.attention_mask
    assert mask.shape == (1, n + 6, n + 6)
    assert torch.equal(mask[:, :n, :n], torch.ones(1, n, n))
    torch.testing.assert_close(mask[:, :n, n:], torch.full((1, n, 6), 0.3))
    torch.testing.assert_close(mask[:, n:, :n], torch.full((1, 6, n), 0.3))
    assert torch.equal(mask[:, n:, n:], torch.ones(1, 6, 6))
    # A second group: sees the target with its own weights, never the first group.
    per_token = torch.linspace(0, 1, 6)
    out2 = VideoConditionByKeyframeIndex(_rand(1, C, 1, 2, 3), 4, attention_strength=per_token).apply_to(
        out, video_tools
    )
    m2 = out2.attention_mask
    assert m2.shape == (1, n + 12, n + 12)
    assert torch.equal(m2[:, : n + 6, : n + 6], mask)
    torch.testing.assert_close(m2[0, 0, n + 6 :], per_token)
    assert torch.equal(m2[:, n : n + 6, n + 6 :], torch.zeros(1, 6, 6))
    assert torch.equal(m2[:, n + 6 :, n : n + 6], torch.zeros(1, 6, 6))
    # Appending without a strength once a mask exists keeps the mask in step (cross weight 1).
    out3 = VideoConditionByKeyframeIndex(_rand(1, C, 1, 2, 3), 8).apply_to(out2, video_tools)
    assert out3.attention_mask.shape == (1, n + 18, n + 18)
    assert torch.equal(out3.attention_mask[:, :n, n + 12 :], torch.ones(1, n, 6))
    with pytest.raises(ConditioningError, match="attention strength"):
        extend_attention_mask(state, n, 6, torch.ones(5))


def test_mask_conditioning_blends_clean_and_mask(video_tools):
    state = video_tools.create_initial_state()
    latent = _rand(*video_tools.target_shape.dims)
    cells = torch.zeros(1, 3, 2, 3)
    cells[0, 2, 1, 0] = 1.0  # frame 2, row 1, column 0 -> token (2*2+1)*3+0 = 15
    out = VideoConditionByMask(latent, cells, strength=0.75).apply_to(state, video_tools)
    changed = (out.denoise_mask != state.denoise_mask).flatten().nonzero().flatten().tolist()
    assert changed == [15]
    assert float(out.denoise_mask[0, 15]) == pytest.approx(0.25)
    torch.testing.assert_close(out.clean_latent[0, 15], video_tools.patchify(latent)[0, 15])
    with pytest.raises(ConditioningError, match="mask"):
        VideoConditionByMask(latent, torch.zeros(1, 3, 2, 2)).apply_to(state, video_tools)


def test_temporal_region_mask_video_and_audio(video_tools, audio_tools):
    state = video_tools.create_initial_state()
    # Latent frames cover [0, 1/24), [1/24, 9/24), [9/24, 17/24) s: a window inside frame 2 only.
    out = TemporalRegionMask(0.4, 0.5).apply_to(state, video_tools)
    per = video_tools.tokens_per_latent_frame
    assert out.denoise_mask.flatten().tolist() == [0.0] * (2 * per) + [1.0] * per
    audio = audio_tools.create_initial_state()
    # Audio steps cover [0,.01), [.01,.05), [.05,.09), [.09,.13), [.13,.17), [.17,.21) s.
    out = TemporalRegionMask(0.06, 0.12).apply_to(audio, audio_tools)
    assert out.denoise_mask.flatten().tolist() == [0, 0, 1, 1, 0, 0]
    with pytest.raises(ConditioningError, match="after its start"):
        TemporalRegionMask(1.0, 1.0)


def test_temporal_region_mask_leaves_appended_tokens(video_tools):
    state = VideoConditionByKeyframeIndex(_rand(1, C, 1, 2, 3), 4, strength=0.5).apply_to(
        video_tools.create_initial_state(), video_tools
    )
    out = TemporalRegionMask(0.0, 10.0).apply_to(state, video_tools)
    torch.testing.assert_close(out.denoise_mask[:, video_tools.token_count :], torch.full((1, 6, 1), 0.5))


def test_frozen_modality(audio_tools):
    state = audio_tools.create_initial_state()
    source = _rand(*audio_tools.target_shape.dims)
    out = FrozenModality(source).apply_to(state, audio_tools)
    assert out.frozen
    assert torch.equal(out.denoise_mask, torch.zeros_like(state.denoise_mask))
    torch.testing.assert_close(out.latent, audio_tools.patchify(source))
    torch.testing.assert_close(out.clean_latent, audio_tools.patchify(source))
    noisy = add_noise(out, _rand(*out.latent.shape, seed=2), 1.0)
    torch.testing.assert_close(noisy.latent, out.clean_latent)  # the noiser cannot touch it
    with pytest.raises(ConditioningError, match="frozen latent"):
        FrozenModality(_rand(1, 2, 5, 4)).apply_to(state, audio_tools)


def test_reference_audio_appends_with_positions(audio_tools):
    state = audio_tools.create_initial_state()
    ref = _rand(1, 2, 3, 4)
    out = AudioConditionByReferenceLatent(ref, strength=1.0).apply_to(state, audio_tools)
    assert out.token_count == 9
    torch.testing.assert_close(out.clean_latent[:, 6:], audio_tools.patchify(ref))
    torch.testing.assert_close(out.positions[:, :, 6:], state.positions[:, :, :3])
    assert torch.equal(out.denoise_mask[:, 6:], torch.zeros(1, 3, 1))
    before = AudioConditionByReferenceLatent.preceding(ref).apply_to(state, audio_tools)
    ref_time = before.positions[0, 0, 6:]
    assert float(ref_time[-1, 1]) == pytest.approx(-0.04)
    assert float(ref_time[0, 0]) == pytest.approx(-0.09 - 0.04)
    explicit = torch.full((1, 1, 3, 2), -1.0)
    custom = AudioConditionByReferenceLatent(ref, positions=explicit).apply_to(state, audio_tools)
    assert torch.equal(custom.positions[:, :, 6:], explicit)


def test_apply_conditionings_in_order_then_clear(video_tools):
    items = [
        VideoConditionByLatentIndex(_rand(1, C, 1, 2, 3), 1.0),
        VideoConditionByKeyframeIndex(_rand(1, C, 1, 2, 3, seed=1), 16, 1.0),
        VideoConditionByReferenceLatent(_rand(1, C, 3, 2, 3, seed=2)),
    ]
    state = apply_conditionings(video_tools.create_initial_state(), items, video_tools)
    assert state.token_count == video_tools.token_count + 6 + 18
    assert state.positions.shape[2] == state.token_count and state.denoise_mask.shape[1] == state.token_count
    assert video_tools.state_to_latent(state).shape == video_tools.target_shape.dims


def test_audio_mask_keeps_chosen_steps_clean_and_leaves_the_others(audio_tools):
    state = audio_tools.create_initial_state()
    latent = _rand(1, 2, 6, 4)
    mask = torch.tensor([[1.0, 0.0, 0.5, 0.0, 0.0, 1.0]])
    out = AudioConditionByMask(latent, mask).apply_to(state, audio_tools)
    tokens = audio_tools.patchify(latent)
    torch.testing.assert_close(out.denoise_mask[0, :, 0], 1 - mask[0])
    torch.testing.assert_close(out.clean_latent[:, [0, 5]], tokens[:, [0, 5]])
    torch.testing.assert_close(out.clean_latent[:, 2], 0.5 * tokens[:, 2])
    assert torch.equal(out.clean_latent[:, [1, 3, 4]], state.clean_latent[:, [1, 3, 4]])
    noisy = add_noise(out, _rand(*out.latent.shape, seed=1))
    torch.testing.assert_close(noisy.latent[:, [0, 5]], tokens[:, [0, 5]])


def test_audio_span_places_a_suffix_at_the_last_steps(audio_tools):
    latent = _rand(1, 2, 2, 4)
    item = AudioConditionByMask.span(latent, target_steps=6, start=4)
    out = item.apply_to(audio_tools.create_initial_state(), audio_tools)
    assert out.denoise_mask[0, :, 0].tolist() == [1, 1, 1, 1, 0, 0]
    torch.testing.assert_close(out.clean_latent[:, 4:], audio_tools.patchify(latent))
    with pytest.raises(ConditioningError, match=r"steps \[5, 7\) fall outside the target's 6 steps"):
        AudioConditionByMask.span(latent, target_steps=6, start=5)
    with pytest.raises(ConditioningError, match=r"must be \(B, T\)"):
        item = AudioConditionByMask(_rand(1, 2, 6, 4), torch.ones(1, 5))
        item.apply_to(audio_tools.create_initial_state(), audio_tools)
