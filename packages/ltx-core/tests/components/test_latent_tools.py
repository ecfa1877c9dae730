"""Patchifiers and latent tools: token order, round trips, positions, initial state, clearing."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.patchifiers import AudioPatchifier, VideoPatchifier
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools, replace_latent
from ltx_core.types import AudioLatentShape, LatentState, VideoLatentShape, VideoPixelShape


def test_video_token_order_is_fhw_row_major_with_channel_features():
    shape = VideoLatentShape(2, 4, 3, 2, 5)
    latent = torch.randn(shape.dims)
    tokens = VideoPatchifier.patchify(latent)
    assert tokens.shape == (2, 3 * 2 * 5, 4)
    f, h, w = 2, 1, 3
    torch.testing.assert_close(tokens[1, (f * 2 + h) * 5 + w], latent[1, :, f, h, w])
    torch.testing.assert_close(VideoPatchifier.unpatchify(tokens, shape), latent)


def test_audio_token_features_are_channel_major():
    latent = torch.randn(2, 8, 7, 16)
    tokens = AudioPatchifier.patchify(latent)
    assert tokens.shape == (2, 7, 128)
    c, m, t = 5, 11, 4
    assert tokens[1, t, c * 16 + m] == latent[1, c, t, m]
    torch.testing.assert_close(AudioPatchifier.unpatchify(tokens, AudioLatentShape(2, 8, 7, 16)), latent)


def test_unpatchify_rejects_wrong_token_count():
    with pytest.raises(ValueError, match="expected"):
        VideoPatchifier.unpatchify(torch.zeros(1, 5, 4), VideoLatentShape(1, 4, 1, 2, 2))
    with pytest.raises(ValueError, match="5-D"):
        VideoPatchifier.patchify(torch.zeros(1, 4, 2, 2))


def test_video_positions_follow_the_causal_grid():
    tools = VideoLatentTools(VideoLatentShape(1, 128, 3, 2, 2), fps=25.0)
    pos = tools.positions()
    assert pos.shape == (1, 3, 12, 2) and pos.dtype == torch.float32
    per_frame = 4
    # Latent frame f covers pixel frames [max(8f - 7, 0), 8f + 1).
    for f, (start, end) in enumerate([(0, 1), (1, 9), (9, 17)]):
        torch.testing.assert_close(pos[0, 0, f * per_frame], torch.tensor([start / 25.0, end / 25.0]))
    torch.testing.assert_close(pos[0, 1, 3], torch.tensor([32.0, 64.0]))  # token (0, 1, 1): row 1
    torch.testing.assert_close(pos[0, 2, 1], torch.tensor([32.0, 64.0]))  # token (0, 0, 1): column 1
    no_fix = VideoLatentTools(VideoLatentShape(1, 128, 3, 2, 2), fps=25.0, causal_fix=False).positions()
    torch.testing.assert_close(no_fix[0, 0, 4], torch.tensor([8 / 25.0, 16 / 25.0]))


def test_audio_positions_in_seconds():
    pos = AudioLatentTools(AudioLatentShape(2, 8, 4, 16)).positions()
    assert pos.shape == (2, 1, 4, 2)
    expected = torch.tensor([[0, 1], [1, 5], [5, 9], [9, 13]], dtype=torch.float32) * 160 / 16000
    torch.testing.assert_close(pos[1, 0], expected)


def test_shapes_from_pixels_and_duration():
    pixels = VideoPixelShape(1, 121, 512, 768, fps=24.0)
    video = VideoLatentTools.from_pixel_shape(pixels)
    assert video.target_shape.dims == (1, 128, 16, 16, 24)
    audio = AudioLatentTools.from_video(pixels)
    assert audio.target_shape.dims == (1, 8, round(121 / 24 * 25), 16)
    with pytest.raises(ValueError, match="8k\\+1"):
        VideoLatentTools.from_pixel_shape(VideoPixelShape(1, 120, 512, 768))
    with pytest.raises(ValueError, match="duration"):
        AudioLatentTools.from_duration(1, 0.0)


def test_initial_state_and_clear_conditioning():
    tools = VideoLatentTools(VideoLatentShape(1, 4, 2, 2, 3), fps=24.0)
    latent = torch.randn(tools.target_shape.dims)
    state = tools.create_initial_state(dtype=torch.float32, initial_latent=latent)
    assert state.latent.shape == (1, 12, 4)
    assert torch.equal(state.denoise_mask, torch.ones(1, 12, 1))
    torch.testing.assert_close(state.clean_latent, state.latent)
    grown = LatentState(
        latent=torch.cat([state.latent, torch.ones(1, 5, 4)], dim=1),
        denoise_mask=torch.zeros(1, 17, 1),
        positions=torch.cat([state.positions, torch.zeros(1, 3, 5, 2)], dim=2),
        clean_latent=torch.cat([state.clean_latent, torch.ones(1, 5, 4)], dim=1),
        attention_mask=torch.ones(1, 17, 17),
        frozen=True,
    )
    cleared = tools.clear_conditioning(grown)
    assert cleared.token_count == 12 and cleared.attention_mask is None and cleared.frozen
    assert torch.equal(cleared.denoise_mask, torch.ones(1, 12, 1))
    torch.testing.assert_close(tools.state_to_latent(grown), latent)
    with pytest.raises(ValueError, match="expected"):
        tools.create_initial_state(initial_latent=torch.zeros(1, 4, 2, 2, 2))


def test_replace_latent_checks_shape():
    state = AudioLatentTools(AudioLatentShape(1, 8, 3, 16)).create_initial_state()
    assert replace_latent(state, torch.ones_like(state.latent)).latent.sum() == state.latent.numel()
    with pytest.raises(ValueError, match="shape"):
        replace_latent(state, torch.ones(1, 4, 128))
