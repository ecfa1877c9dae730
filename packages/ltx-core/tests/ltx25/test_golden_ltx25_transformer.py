"""Parity of the LTX-2.5 transformer (keyframe embedding, no prompt AdaLN, bias-free FFNs) with the
reference, built from the split transformer file through `ModelFiles`."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import build_model
from ltx_core.model.transformer import AV_TRANSFORMER, Modality, X0Model

pytestmark = pytest.mark.golden
# The diffusers-folder component of `ltx25_model_source`: the transformer it builds.
DIFFUSERS_COMPONENTS = ("transformer",)

PREFIX = "transformer"


def _modality(fx, case: str, stream: str) -> Modality:
    cond = case == "cond"
    return Modality(
        latent=fx[f"{PREFIX}.{stream}_latent"],
        timesteps=fx[f"{PREFIX}.{case}.{stream}_timesteps"],
        sigma=fx[f"{PREFIX}.{case}.{stream}_sigma"],
        positions=fx[f"{PREFIX}.{stream}_positions"],
        context=fx[f"{PREFIX}.{stream}_context"],
        context_mask=fx[f"{PREFIX}.context_mask"] if cond else None,
        # A set whose transformer has no keyframe embedding may record no mask.
        keyframes_mask=fx[f"{PREFIX}.keyframes_mask"]
        if cond and stream == "video" and f"{PREFIX}.keyframes_mask" in fx
        else None,
    )


def test_ltx25_transformer_matches_reference(golden_ltx25_fixture, ltx25_model_source, assert_golden_close):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    params = fx.params[PREFIX]
    model = build_model(AV_TRANSFORMER, ltx25_model_source, dtype=torch.float32, device="cpu")
    assert model.num_blocks == params["num_blocks"]
    assert hasattr(model, "keyframes_abs_pos_embedding") == params["has_keyframes_abs_pos_embedding"]
    x0_model = X0Model(model)
    cases = list(params["cases"])
    assert set(cases) <= {"full", "cond"}, f"unknown transformer cases {cases}"
    for case in cases:
        video, audio = _modality(fx, case, "video"), _modality(fx, case, "audio")
        velocities = model(video, audio)
        denoised = x0_model(video, audio)
        for stream, velocity, x0 in zip(("video", "audio"), velocities, denoised):
            assert_golden_close(velocity, fx[f"{PREFIX}.{case}.{stream}_velocity"], name=f"{case}.{stream}_velocity")
            assert_golden_close(x0, fx[f"{PREFIX}.{case}.{stream}_denoised"], name=f"{case}.{stream}_denoised")
