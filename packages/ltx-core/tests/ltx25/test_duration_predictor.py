"""Frame-count rules of the duration prediction on a tiny in-test head (no golden files)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.model.duration_head import (
    DurationHead,
    DurationHeadConfig,
    DurationRange,
    frames_for_seconds,
    predict_num_frames,
)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(2.0, 41), (2.05, 49), (0.01, 25), (100.0, 473), (1.0, 25)],
)
def test_frames_snap_to_8k_plus_1_within_range(seconds, expected):
    # 24 fps, [1 s, 20 s] -> [24, 480] frames: floors to the grid, below the minimum snaps up.
    assert frames_for_seconds(seconds, frame_rate=24.0, min_frames=24, max_frames=480) == expected


def test_prediction_takes_one_prompt_and_clamps():
    torch.manual_seed(0)
    head = DurationHead(
        DurationHeadConfig(video_dim=8, audio_dim=4, pooler_hidden_dim=8, num_pooler_heads=2, mlp_hidden=8)
    )
    with torch.no_grad():
        head.mlp_out.bias.fill_(10.0)  # exp(~10) s: far above any range
    video, audio = torch.randn(1, 5, 8), torch.randn(1, 3, 4)
    frames = predict_num_frames(head, video, audio, frame_rate=24.0, duration_range=DurationRange(0.5, 2.0))
    assert frames == 41 and (frames - 1) % 8 == 0
    with pytest.raises(ValueError, match="one prompt"):
        predict_num_frames(head, video.expand(2, -1, -1), None, frame_rate=24.0)
    with pytest.raises(ValueError, match="video context, the audio context, or both"):
        head(None, None)
    with pytest.raises(ValueError, match="0 < min <= max"):
        DurationRange(3.0, 1.0)
