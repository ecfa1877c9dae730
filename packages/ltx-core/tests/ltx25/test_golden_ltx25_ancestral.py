"""Parity of the Euler-ancestral steps (LTX-2.5 distilled stage 1) with the reference, and of its
own noise stream: the recorded draws are what a generator seeded as recorded gives."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components import EulerAncestralStep
from ltx_core.components.sampling import plain_noise

pytestmark = pytest.mark.golden

P = "euler_ancestral"


def test_ancestral_steps_match_reference(golden_ltx25_fixture, assert_golden_close):
    fx = golden_ltx25_fixture("fx_ltx25_components")
    params = fx.params[P]
    step = EulerAncestralStep(eta=params["eta"], s_noise=params["s_noise"])
    sigmas, denoised = fx[f"{P}.sigmas"], fx[f"{P}.denoised"]
    generator = torch.Generator().manual_seed(params["generator_seed"])
    x, draw = fx[f"{P}.sample"], 0
    for i in range(len(sigmas) - 1):
        noise = None
        if sigmas[i + 1] != 0:
            noise = fx[f"{P}.noise.{draw}"]
            assert torch.equal(plain_noise(x, generator), noise), f"draw {draw} differs from the seeded stream"
            draw += 1
        x = step.step(x, denoised[i], sigmas, i, noise)
        assert_golden_close(x, fx[f"{P}.step.{i}"], name=f"step {i}")
    assert f"{P}.noise.{draw}" not in fx, "the reference drew more noise than the steps used"
