"""Token positions and latent shapes against the transformer fixture's inputs (`fx_transformer`)."""

from __future__ import annotations

import pytest

from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import VideoPixelShape

pytestmark = pytest.mark.golden


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_transformer")


def test_video_shape_and_positions(fx, assert_golden_close):
    p = fx.params
    tools = VideoLatentTools.from_pixel_shape(VideoPixelShape(**p["pixel_shape"]))
    assert list(tools.target_shape.dims) == p["video_latent_shape"]
    assert tools.token_count == p["video_tokens"]
    assert tools.tokens_per_latent_frame == p["tokens_per_latent_frame"]
    want = fx["video_positions"]
    got = tools.positions()
    assert got.dtype == want.dtype
    assert_golden_close(got, want, atol=1e-7, rtol=1e-6, name="video_positions")
    assert_golden_close(tools.create_initial_state().positions, want, atol=1e-7, rtol=1e-6, name="state positions")


def test_audio_shape_and_positions(fx, assert_golden_close):
    p = fx.params
    tools = AudioLatentTools.from_video(VideoPixelShape(**p["pixel_shape"]))
    assert list(tools.target_shape.dims) == p["audio_latent_shape"]
    assert tools.token_count == p["audio_tokens"]
    want = fx["audio_positions"]
    got = tools.positions()
    assert got.dtype == want.dtype
    assert_golden_close(got, want, atol=1e-7, rtol=1e-6, name="audio_positions")
