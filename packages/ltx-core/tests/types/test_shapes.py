import pytest

from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape


def test_latent_shape_from_pixels_and_back():
    pixels = VideoPixelShape(batch=2, frames=121, height=512, width=768, fps=24.0)
    latent = VideoLatentShape.from_pixel_shape(pixels)
    assert latent.dims == (2, 128, 16, 16, 24)
    assert latent.token_count == 16 * 16 * 24
    assert latent.to_pixel_shape(fps=24.0) == pixels


@pytest.mark.parametrize("frames", [1, 9, 121])
def test_valid_frame_counts_pass(frames):
    VideoPixelShape(1, frames, 64, 64).check()


@pytest.mark.parametrize("frames", [0, 2, 8, 10, 120])
def test_frame_counts_off_the_8k_plus_1_grid_are_named(frames):
    with pytest.raises(ValueError, match=f"8k\\+1.*got {frames}"):
        VideoPixelShape(1, frames, 64, 64).check()


def test_spatial_multiple_is_checked_per_axis():
    VideoPixelShape(1, 9, 96, 64).check(spatial_multiple=32)
    with pytest.raises(ValueError, match="height must be a positive multiple of 64, got 96"):
        VideoPixelShape(1, 9, 96, 64).check(spatial_multiple=64)
    with pytest.raises(ValueError, match="width .* got 100"):
        VideoPixelShape(1, 9, 64, 100).check()


def test_fps_must_be_positive():
    with pytest.raises(ValueError, match="frame rate"):
        VideoPixelShape(1, 9, 64, 64, fps=0).check()


def test_audio_latent_spans_the_video_duration():
    # 25 audio latents per second: 121 frames at 24 fps -> round(5.0417 * 25) = 126.
    shape = AudioLatentShape.from_video(VideoPixelShape(1, 121, 512, 768, fps=24.0))
    assert shape.dims == (1, 8, 126, 16)
    assert AudioLatentShape.from_duration(1, 9 / 24.0).frames == 9
