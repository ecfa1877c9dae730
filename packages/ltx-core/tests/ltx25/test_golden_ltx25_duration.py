"""Parity of the LTX-2.5 duration head (seconds) and the frame-count prediction with the reference."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import build_model
from ltx_core.model.duration_head import DURATION_HEAD, DurationRange, predict_num_frames

pytestmark = pytest.mark.golden
# The diffusers-folder component of `ltx25_model_source`: the duration head it builds.
DIFFUSERS_COMPONENTS = ("duration_head",)


@pytest.fixture(scope="module")
def head(ltx25_model_source):
    """From the split files, and from the diffusers folder (its q/k/v pieces joined into the fused projection)."""
    return build_model(DURATION_HEAD, ltx25_model_source, dtype=torch.float32, device="cpu")


def test_duration_head_seconds_match_reference(golden_ltx25_fixture, head, assert_golden_close):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    video, audio = fx["duration.video_encoding"], fx["duration.audio_encoding"]
    with torch.inference_mode():
        assert_golden_close(head(video, audio), fx["duration.seconds"], name="seconds")
        assert_golden_close(head(video, None), fx["duration.seconds_video_only"], name="seconds_video_only")
        assert_golden_close(head(None, audio), fx["duration.seconds_audio_only"], name="seconds_audio_only")


def test_frame_counts_match_reference(golden_ltx25_fixture, head):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    p = fx.params["duration"]
    video, audio = fx["duration.video_encoding"], fx["duration.audio_encoding"]
    for name, rng in (
        ("duration.num_frames", DurationRange(p["default_min_seconds"], p["default_max_seconds"])),
        ("duration.num_frames_clamped", DurationRange(p["clamped_min_seconds"], p["clamped_max_seconds"])),
    ):
        got = [
            predict_num_frames(head, video[i : i + 1], audio[i : i + 1], frame_rate=p["frame_rate"], duration_range=rng)
            for i in range(video.shape[0])
        ]
        assert got == fx[name].tolist(), name
