"""Generated keyframe slots: one-pixel-frame tokens, marked for the keyframe embedding, fully generated,
starting from zeros or given content, and read back out of a state by their place."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.noisers import add_noise
from ltx_core.conditioning import (
    ConditioningError,
    VideoConditionByReferenceLatent,
    VideoGeneratedKeyframeSlots,
    apply_conditionings,
    read_generated_keyframes,
)
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.types import VideoLatentShape

C, FPS = 4, 24.0


@pytest.fixture
def tools() -> VideoLatentTools:
    return VideoLatentTools(VideoLatentShape(1, C, 4, 2, 3), fps=FPS)  # 25 pixel frames, 64 x 96 px


def test_slots_are_marked_generated_one_frame_tokens(tools):
    state = tools.create_initial_state()
    out = VideoGeneratedKeyframeSlots((8, 24)).apply_to(state, tools)
    per_frame, target = tools.tokens_per_latent_frame, tools.token_count
    assert out.latent.shape[1] == target + 2 * per_frame
    assert torch.equal(out.denoise_mask[:, target:], torch.ones(1, 2 * per_frame, 1))
    # The target's first latent frame and the slots get the embedding; the other target frames do not.
    assert out.keyframes_mask is not None
    assert out.keyframes_mask[0, :per_frame].eq(1).all() and out.keyframes_mask[0, per_frame:target].eq(0).all()
    assert out.keyframes_mask[0, target:].eq(1).all()
    time = out.positions[0, 0, target:]  # seconds, [start, end)
    assert torch.allclose(time[:per_frame], torch.tensor([8 / FPS, 9 / FPS]).expand(per_frame, 2))
    assert torch.allclose(time[per_frame:], torch.tensor([24 / FPS, 25 / FPS]).expand(per_frame, 2))
    # Spatial positions are the target frame's own.
    assert torch.equal(out.positions[0, 1:, target : target + per_frame], state.positions[0, 1:, :per_frame])
    assert out.latent[:, target:].eq(0).all() and out.clean_latent[:, target:].eq(0).all()


def test_initial_content_is_noised_like_generated_tokens_and_reads_back(tools):
    initial = torch.randn(1, C, 2, 2, 3)
    state = VideoGeneratedKeyframeSlots((8, 16), initial).apply_to(tools.create_initial_state(), tools)
    # Before noising the slots hold the content; at noise scale 0 they keep it, at 1 they are the noise.
    assert torch.equal(read_generated_keyframes(state, tools, 2), initial)
    noise = torch.randn_like(state.latent)
    half = add_noise(state, noise, 0.5)
    expected = 0.5 * tools.patchify(initial) + 0.5 * noise[:, tools.token_count :]
    assert torch.allclose(half.latent[:, tools.token_count :], expected)


def test_slots_read_back_from_before_later_tokens(tools):
    initial = torch.randn(1, C, 1, 2, 3)
    items = [
        VideoGeneratedKeyframeSlots((16,), initial),
        VideoConditionByReferenceLatent(torch.randn(1, C, 4, 1, 1), downscale_factor=2),
    ]
    state = apply_conditionings(tools.create_initial_state(), items, tools)
    assert torch.equal(read_generated_keyframes(state, tools, 1, first_token=tools.token_count), initial)
    with pytest.raises(ValueError, match="no 3 keyframe slots"):
        read_generated_keyframes(state, tools, 3)


@pytest.mark.parametrize(
    ("positions", "match"),
    [((), "non-empty and increasing"), ((16, 8), "non-empty and increasing"), ((0,), r"lie in \[1, 25\)"),
     ((25,), r"lie in \[1, 25\)")],
)  # fmt: skip
def test_bad_positions_are_refused(tools, positions, match):
    with pytest.raises(ConditioningError, match=match):
        VideoGeneratedKeyframeSlots(positions).apply_to(tools.create_initial_state(), tools)


def test_initial_of_the_wrong_shape_is_refused(tools):
    with pytest.raises(ConditioningError, match=r"initial latent must be \(1, 4, 1, 2, 3\)"):
        VideoGeneratedKeyframeSlots((8,), torch.zeros(1, C, 1, 1, 3)).apply_to(tools.create_initial_state(), tools)
