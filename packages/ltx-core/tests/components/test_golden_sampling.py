"""Parity with `fx_sampling`: schedules, guiders, diffusion steps, res2s coefficients, noiser.

Every case, index and step name is discovered from the fixture's params and tensor names.
"""

from __future__ import annotations

import re

import pytest
import torch

from ltx_core.components.diffusion_steps import EulerAncestralStep, EulerStep, Res2sStep, res2s_coefficients
from ltx_core.components.guiders import (
    APGGuider,
    CFGGuider,
    CFGStarGuider,
    MultiModalGuider,
    MultiModalGuiderParams,
    STGGuider,
    projection_coef,
)
from ltx_core.components.noisers import GaussianNoiser, add_noise
from ltx_core.components.schedulers import (
    LTX2Scheduler,
    distilled_sigmas,
    stage_2_distilled_sigmas,
    token_count_of,
)
from ltx_core.types import LatentState

pytestmark = pytest.mark.golden

TOL = {"atol": 1e-5, "rtol": 1e-5}
STEP_INPUTS = {"sigmas", "sample", "denoised", "noise"}
SCHEDULER_OPTIONS = ("max_shift", "base_shift", "stretch", "terminal")


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_sampling")


def test_scheduler_cases(fx, assert_golden_close):
    cases = fx.params["scheduler_cases"]
    assert cases, "fixture lists no scheduler cases"
    for i, case in enumerate(cases):
        unknown = set(case) - {"steps", "latent_shape", "tokens", *SCHEDULER_OPTIONS}
        assert not unknown, f"scheduler case {i} has options this test does not know: {sorted(unknown)}"
        scheduler = LTX2Scheduler(**{k: case[k] for k in SCHEDULER_OPTIONS if k in case})
        if "latent_shape" in case:
            if "tokens" in case:
                assert token_count_of(case["latent_shape"]) == case["tokens"]
            sigmas = scheduler.sigmas(case["steps"], latent_shape=case["latent_shape"])
        else:
            if "tokens" in case:
                assert scheduler.default_tokens == case["tokens"]
            sigmas = scheduler.sigmas(case["steps"])
        assert sigmas.dtype == torch.float32
        assert_golden_close(sigmas, fx[f"scheduler.{i}.sigmas"], **TOL, name=f"scheduler.{i}")


def test_distilled_sigma_constants(fx, assert_golden_close):
    assert_golden_close(distilled_sigmas(), fx["distilled_sigmas"], **TOL, name="distilled_sigmas")
    assert_golden_close(stage_2_distilled_sigmas(), fx["stage_2_distilled_sigmas"], **TOL, name="stage_2")


def test_multimodal_guider(fx, assert_golden_close):
    entries = fx.params["multimodal_guider_params"]
    assert entries
    for i, entry in enumerate(entries):
        guider = MultiModalGuider(MultiModalGuiderParams(**entry))
        got = guider.calculate(
            fx["guider.cond"], fx["guider.uncond_text"], fx["guider.uncond_perturbed"], fx["guider.uncond_modality"]
        )
        assert_golden_close(got, fx[f"guider.multimodal.{i}"], **TOL, name=f"multimodal.{i}")


def test_simple_guiders(fx, assert_golden_close):
    p = fx.params["simple_guider_params"]
    cond, uncond, perturbed = fx["guider.cond"], fx["guider.uncond_text"], fx["guider.uncond_perturbed"]
    assert_golden_close(CFGGuider(p["cfg"]).delta(cond, uncond), fx["guider.cfg_delta"], **TOL, name="cfg")
    assert_golden_close(
        CFGStarGuider(p["cfg_star"]).delta(cond, uncond), fx["guider.cfg_star_delta"], **TOL, name="cfg_star"
    )
    assert_golden_close(STGGuider(p["stg"]).delta(cond, perturbed), fx["guider.stg_delta"], **TOL, name="stg")
    apg = APGGuider(**p["apg"])
    assert_golden_close(apg.delta(cond, uncond), fx["guider.apg_delta"], **TOL, name="apg")
    assert_golden_close(projection_coef(cond, uncond), fx["guider.projection_coef"], **TOL, name="projection_coef")


def _parse_step_name(name: str):
    """'euler', 'euler_ancestral_eta0.5_snoise0.8', 'res2s_eta0.5' -> a step object."""
    base, options = [], {}
    for part in name.split("_"):
        m = re.fullmatch(r"([a-z]+)(\d+(?:\.\d+)?)", part)
        if m and base:
            options[m.group(1)] = float(m.group(2))
        else:
            base.append(part)
    kind = "_".join(base)
    if kind == "euler" and not options:
        return EulerStep()
    if kind == "euler_ancestral" and set(options) <= {"eta", "snoise"}:
        return EulerAncestralStep(eta=options.get("eta", 1.0), s_noise=options.get("snoise", 1.0))
    if kind == "res2s" and set(options) <= {"eta"}:
        return Res2sStep(eta=options.get("eta", 0.5))
    raise AssertionError(f"unknown step fixture name {name!r}")


def test_diffusion_steps(fx, assert_golden_close):
    indices = set(fx.params["step_indices"])
    found = []
    for key in fx.tensors:
        if not key.startswith("step.") or key[len("step.") :] in STEP_INPUTS:
            continue
        name, index = key[len("step.") :].rsplit(".", 1)
        assert int(index) in indices, f"{key}: index not in params.step_indices"
        found.append((name, int(index), key))
    assert found, "no step outputs in the fixture"
    assert {index for _, index, _ in found} == indices, "some params.step_indices have no step outputs"
    sigmas, sample, denoised, noise = (fx[f"step.{k}"] for k in ("sigmas", "sample", "denoised", "noise"))
    for name, index, key in sorted(found):
        got = _parse_step_name(name).step(sample, denoised, sigmas, index, noise)
        assert_golden_close(got, fx[key], **TOL, name=key)


def test_res2s_coefficients(fx, assert_golden_close):
    hs = fx["res2s.h"]
    assert hs.dtype == torch.float64
    got = torch.tensor([res2s_coefficients(float(h)) for h in hs], dtype=torch.float64)
    assert_golden_close(got, fx["res2s.coefficients_a21_b1_b2"], **TOL, name="res2s coefficients")


def test_noiser(fx, assert_golden_close):
    clean = fx["noiser.clean_latent"]
    state = LatentState(
        latent=clean.clone(),
        denoise_mask=fx["noiser.denoise_mask"],
        positions=torch.zeros(clean.shape[0], 1, clean.shape[1], 2),
        clean_latent=clean,
    )
    scale = fx.params["noiser"]["noise_scale"]
    want = fx["noiser.latent"]
    assert_golden_close(add_noise(state, fx["noiser.noise"], scale).latent, want, **TOL, name="add_noise")
    noiser = GaussianNoiser(torch.Generator().manual_seed(0))
    assert_golden_close(noiser(state, scale, noise=fx["noiser.noise"]).latent, want, **TOL, name="noiser(noise=)")
