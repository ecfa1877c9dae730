"""The decoders of a run are built by one context manager (`loaded_decoders`): only those asked for, the
vocoder in float32, and every one freed when the block ends, also when decoding fails."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import ltx_pipelines.engine.model_loading as model_loading
from ltx_pipelines.engine.model_loading import Placement, loaded_decoders


def recording_placement(built: list[tuple[str, torch.dtype]]) -> Placement:
    def build(spec: Any, path: Any, *, dtype: torch.dtype, device: torch.device, **options: Any) -> nn.Module:
        built.append((spec.name, dtype))
        return nn.Linear(1, 1)

    return Placement(torch.device("cpu"), torch.bfloat16, builder=build)


def test_only_the_decoders_asked_for_are_built_and_all_are_freed_after_a_failure(model_files, monkeypatch):
    built: list[tuple[str, torch.dtype]] = []
    freed: list[nn.Module] = []
    monkeypatch.setattr(model_loading, "release", lambda *models: freed.extend(models))
    placement = recording_placement(built)
    with (
        pytest.raises(RuntimeError, match="decode"),
        loaded_decoders(model_files.checkpoint, placement, video=True, audio=True) as decoders,
    ):
        assert all(m is not None for m in (decoders.video, decoders.audio, decoders.vocoder))
        raise RuntimeError("simulated decode failure")
    assert [dtype for _, dtype in built] == [torch.bfloat16, torch.bfloat16, torch.float32]
    assert built[0][0] == "video VAE decoder"
    assert sorted(map(id, freed)) == sorted(map(id, (decoders.video, decoders.audio, decoders.vocoder)))

    built.clear()
    with loaded_decoders(model_files.checkpoint, recording_placement(built), video=False, audio=True) as decoders:
        assert decoders.video is None and decoders.audio is not None
    assert len(built) == 2
