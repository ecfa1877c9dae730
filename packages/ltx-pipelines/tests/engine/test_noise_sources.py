"""Noise sources: a replay serves stored draws by name and keeps account of what it served."""

from __future__ import annotations

import pytest
import torch

from ltx_pipelines.engine.denoising_stage import ReplayedNoise, SeededNoise

CPU = torch.device("cpu")


def test_replayed_noise_serves_by_name_and_tracks_consumption():
    stored = {
        "run.noise.stage_1.video": torch.randn(1, 4, 8),
        "run.noise.stage_1.res2s.0.step.video": torch.randn(1, 4, 8, dtype=torch.float64),
        "other.noise.stage_1.video": torch.randn(1, 4, 8),
    }
    replay = ReplayedNoise(stored, prefix="run.noise.")
    assert replay.stored == ["stage_1.video", "stage_1.res2s.0.step.video"]
    got = replay("stage_1.res2s.0.step.video", (1, 4, 8), device=CPU, dtype=torch.float64)
    assert torch.equal(got, stored["run.noise.stage_1.res2s.0.step.video"])
    assert replay.unused() == ["stage_1.video"] and replay.repeated() == []
    replay("stage_1.video", (1, 4, 8), device=CPU, dtype=torch.float32)
    replay("stage_1.video", (1, 4, 8), device=CPU, dtype=torch.float32)
    assert replay.unused() == [] and replay.repeated() == ["stage_1.video"]
    assert replay.drawn == ["stage_1.res2s.0.step.video", "stage_1.video", "stage_1.video"]


def test_replayed_noise_refuses_unknown_names_and_wrong_shapes_without_counting_them():
    replay = ReplayedNoise({"a": torch.zeros(2, 3)})
    with pytest.raises(KeyError, match="'b'"):
        replay("b", (2, 3), device=CPU, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        replay("a", (3, 2), device=CPU, dtype=torch.float32)
    assert replay.drawn == [] and replay.unused() == ["a"]


def test_seeded_noise_is_reproducible_and_records_its_draws():
    a, b = SeededNoise(7), SeededNoise(7)
    first = [a(n, (2, 5), device=CPU, dtype=torch.float32) for n in ("x", "y")]
    second = [b(n, (2, 5), device=CPU, dtype=torch.float32) for n in ("x", "y")]
    assert all(torch.equal(p, q) for p, q in zip(first, second))
    assert not torch.equal(first[0], first[1]) and a.drawn == ["x", "y"]
