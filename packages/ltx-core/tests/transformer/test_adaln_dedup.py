"""AdaLN embeddings computed once per distinct timestep equal the per-token computation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx_core.model.transformer import StreamConfig

from .conftest import FLAG_SETS


def _with_timesteps(modality, timesteps):
    return dataclasses.replace(modality, timesteps=timesteps)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    # A matmul over fewer rows may take another kernel: allow float32 rounding, nothing more.
    return bool(((a - b).abs() <= 1e-6 + 1e-5 * b.abs()).all())


@pytest.mark.parametrize("flag_set", sorted(FLAG_SETS))
@pytest.mark.parametrize("pattern", ["one_value_per_item", "two_values_i2v", "every_token_differs"])
def test_dedup_equals_per_token_embeddings(make_model, make_inputs, pattern, flag_set):
    model = make_model(**FLAG_SETS[flag_set])
    video, audio = make_inputs()
    b, t = video.latent.shape[:2]
    if model.config.keyframes_abs_pos_embedding:  # LTX-2.5: some tokens marked as keyframes
        mask = torch.zeros(b, t, 1)
        mask[:, :3] = 1.0
        video = dataclasses.replace(video, keyframes_mask=mask)
    if pattern == "two_values_i2v":  # conditioned first-frame tokens at 0, the rest at sigma
        ts = video.timesteps.clone()
        ts[:, :4] = 0.0
        video = _with_timesteps(video, ts)
    elif pattern == "every_token_differs":
        video = _with_timesteps(video, torch.rand(b, t, 1, generator=torch.Generator().manual_seed(0)))
    model.dedup_timesteps = True
    deduped = model(video, audio)
    model.dedup_timesteps = False
    per_token = model(video, audio)
    for got, want in zip(deduped, per_token):
        assert _close(got, want), f"max |diff| {float((got - want).abs().max()):.3e}"


def test_shared_timestep_keeps_one_modulation_row_per_item(make_model, make_inputs):
    model = make_model()
    video, _ = make_inputs()
    stream: StreamConfig = model.config.video
    state = model._prepare(video, stream, "")
    assert state.timestep_mod.shape == (video.latent.shape[0], 1, model.config.adaln_rows * stream.dim)
    model.dedup_timesteps = False
    assert model._prepare(video, stream, "").timestep_mod.shape[1] == video.latent.shape[1]
