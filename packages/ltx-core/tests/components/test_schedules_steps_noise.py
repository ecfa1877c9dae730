"""Scheduler, guider values, diffusion steps and the noiser: properties checked without fixtures."""

from __future__ import annotations

import math

import pytest
import torch

from ltx_core.components.diffusion_steps import (
    EulerAncestralStep,
    EulerStep,
    GradientEstimationEulerStep,
    Res2sStep,
    phi,
    res2s_coefficients,
)
from ltx_core.components.guiders import (
    GuiderSchedule,
    MultiModalGuider,
    MultiModalGuiderParams,
    guider_params_from_dict,
)
from ltx_core.components.noisers import GaussianNoiser
from ltx_core.components.schedulers import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES, LTX2Scheduler
from ltx_core.types import LatentState


def test_scheduler_shape_monotonic_and_terminal():
    sigmas = LTX2Scheduler().sigmas(10, tokens=2048)
    assert sigmas.shape == (11,) and sigmas.dtype == torch.float32
    assert sigmas[0] == 1.0 and sigmas[-1] == 0.0
    assert bool((sigmas[1:] < sigmas[:-1]).all())
    assert math.isclose(float(sigmas[-2]), 0.1, rel_tol=1e-5)
    unstretched = LTX2Scheduler(stretch=False).sigmas(10, tokens=2048)
    shift = LTX2Scheduler().shift(2048)
    t = 0.5
    assert math.isclose(float(unstretched[5]), math.exp(shift) / (math.exp(shift) + 1 / t - 1), rel_tol=1e-6)


def test_scheduler_shift_anchors_and_token_dependence():
    s = LTX2Scheduler()
    assert math.isclose(s.shift(1024), 0.95) and math.isclose(s.shift(4096), 2.05)
    small = s.sigmas(8, latent_shape=(1, 128, 1, 4, 4))
    large = s.sigmas(8, latent_shape=(1, 128, 16, 32, 32))
    assert bool((large[1:-2] > small[1:-2]).all())  # more tokens -> more time at high noise
    with pytest.raises(ValueError, match="steps"):
        s.sigmas(0)
    with pytest.raises(ValueError, match="either"):
        s.sigmas(4, tokens=5, latent_shape=(1, 1, 5))


def test_distilled_tables():
    assert DISTILLED_SIGMA_VALUES[0] == 1.0 and DISTILLED_SIGMA_VALUES[-1] == 0.0 and len(DISTILLED_SIGMA_VALUES) == 9
    # Stage 2 re-enters the stage-1 schedule at its sixth value.
    assert DISTILLED_SIGMA_VALUES[5:] == STAGE_2_DISTILLED_SIGMA_VALUES


def test_guider_params_are_frozen_values():
    p = MultiModalGuiderParams(cfg_scale=3.0, stg_blocks=[28])
    assert p.stg_blocks == (28,) and hash(p) == hash(MultiModalGuiderParams(cfg_scale=3.0, stg_blocks=(28,)))
    with pytest.raises(AttributeError):
        p.cfg_scale = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="stg_blocks"):
        MultiModalGuiderParams(stg_blocks=(-1,))
    with pytest.raises(ValueError, match="accepted"):
        guider_params_from_dict({"cfg": 3.0})
    assert [MultiModalGuiderParams(skip_step=2).skips_step(i) for i in range(4)] == [False, True, True, False]


def test_guider_without_guidance_returns_cond_and_keeps_dtype():
    cond = torch.randn(1, 5, 4, dtype=torch.bfloat16)
    out = MultiModalGuider(MultiModalGuiderParams()).calculate(cond)
    assert out.dtype == torch.bfloat16 and torch.equal(out, cond)


def test_guider_schedule_bins():
    hi, lo = MultiModalGuiderParams(cfg_scale=5.0), MultiModalGuiderParams(cfg_scale=2.0)
    schedule = GuiderSchedule.from_mapping({0.5: lo, 1.0: hi})
    assert schedule.params_at(0.9) is hi and schedule.params_at(0.5) is lo and schedule.params_at(0.1) is lo
    assert schedule.params_at(2.0) is hi
    with pytest.raises(ValueError):
        GuiderSchedule(())


def _xs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 6, 4, generator=g), torch.randn(2, 6, 4, generator=g), torch.randn(2, 6, 4, generator=g)


def test_euler_lands_on_x0_and_follows_velocity():
    x, x0, _ = _xs()
    sigmas = torch.tensor([1.0, 0.6, 0.0])
    mid = EulerStep().step(x, x0, sigmas, 0)
    torch.testing.assert_close(mid, x + (x - x0) / 1.0 * (0.6 - 1.0))
    torch.testing.assert_close(EulerStep().step(mid, x0, sigmas, 1), x0)
    with pytest.raises(ValueError, match="step_index"):
        EulerStep().step(x, x0, sigmas, 2)


def test_ancestral_reduces_to_euler_at_eta_zero_and_adds_noise_otherwise():
    x, x0, noise = _xs()
    sigmas = torch.tensor([0.9, 0.5, 0.0])
    torch.testing.assert_close(EulerAncestralStep(eta=0.0).step(x, x0, sigmas, 0), EulerStep().step(x, x0, sigmas, 0))
    a = EulerAncestralStep().step(x, x0, sigmas, 0, noise)
    b = EulerAncestralStep().step(x, x0, sigmas, 0, -noise)
    assert not torch.allclose(a, b)
    torch.testing.assert_close(EulerAncestralStep().step(x, x0, sigmas, 1, noise), x0)
    with pytest.raises(ValueError, match="noise"):
        EulerAncestralStep().step(x, x0, sigmas, 0)


def test_res2s_step_and_coefficients():
    x, x_det, noise = _xs()
    sigmas = torch.tensor([0.9, 0.5, 0.0])
    torch.testing.assert_close(Res2sStep(eta=0.0).step(x, x_det, sigmas, 0, noise), x_det)
    torch.testing.assert_close(Res2sStep().step(x, x_det, sigmas, 1, noise), x_det)
    # Small h: a21 -> c2, b2 -> 1/(2 c2) * h-dependent -> 1, b1 -> 0 (phi_1(0) = 1, phi_2(0) = 1/2).
    a21, b1, b2 = res2s_coefficients(1e-12)
    assert math.isclose(a21, 0.5) and math.isclose(b2, 1.0) and math.isclose(b1, 0.0, abs_tol=1e-12)
    h = 0.7
    assert math.isclose(phi(1, -h), (math.exp(-h) - 1) / -h) and math.isclose(phi(2, -h), (math.exp(-h) - 1 + h) / h**2)


def test_gradient_estimation_corrects_with_previous_velocity():
    x, x0, _ = _xs()
    sigmas = torch.tensor([1.0, 0.5, 0.25, 0.0])
    step = GradientEstimationEulerStep(gamma=2.0)
    first, v = step.step(x, x0, sigmas, 0)
    torch.testing.assert_close(first, EulerStep().step(x, x0, sigmas, 0))
    second, v2 = step.step(first, x0, sigmas, 1, v)
    v_now = (first - x0) / 0.5
    torch.testing.assert_close(second, first + (2.0 * (v_now - v) + v) * (0.25 - 0.5))
    last, _ = step.step(second, x0, sigmas, 2, v2)
    torch.testing.assert_close(last, x0)


def _state(mask: torch.Tensor) -> LatentState:
    clean = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)
    return LatentState(clean.clone(), mask, torch.zeros(2, 1, 5, 2), clean)


def test_noiser_is_seeded_and_respects_the_mask():
    mask = torch.tensor([1.0, 1.0, 0.0, 0.5, 1.0]).view(1, 5, 1).expand(2, 5, 1)
    state = _state(mask)
    a = GaussianNoiser.from_seed(7)(state, 1.0)
    b = GaussianNoiser.from_seed(7)(state, 1.0)
    c = GaussianNoiser.from_seed(8)(state, 1.0)
    assert torch.equal(a.latent, b.latent) and not torch.equal(a.latent, c.latent)
    expected_noise = torch.randn(state.latent.shape, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(a.latent[:, :2], expected_noise[:, :2])
    torch.testing.assert_close(a.latent[:, 2], state.clean_latent[:, 2])  # mask 0 stays clean
    torch.testing.assert_close(a.latent[:, 3], 0.5 * state.clean_latent[:, 3] + 0.5 * expected_noise[:, 3])
    partial = GaussianNoiser.from_seed(7)(state, 0.25)
    torch.testing.assert_close(partial.latent[:, 0], 0.75 * state.clean_latent[:, 0] + 0.25 * expected_noise[:, 0])


def test_noiser_replays_given_noise_without_drawing():
    state = _state(torch.ones(2, 5, 1))
    generator = torch.Generator().manual_seed(3)
    noiser = GaussianNoiser(generator)
    before = generator.get_state()
    given = torch.full_like(state.latent, 2.0)
    torch.testing.assert_close(noiser(state, 1.0, noise=given).latent, given)
    assert torch.equal(generator.get_state(), before)
    with pytest.raises(ValueError, match="noise"):
        noiser(state, 1.0, noise=torch.zeros(1, 2, 3))
