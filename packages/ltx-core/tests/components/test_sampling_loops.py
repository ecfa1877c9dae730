"""Sampling loops with small oracle denoisers (no model)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.diffusion_steps import EulerAncestralStep, EulerStep
from ltx_core.components.sampling import (
    blend_with_clean,
    euler_ancestral_denoising_loop,
    euler_denoising_loop,
    gradient_estimation_denoising_loop,
    normalized_noise,
    res2s_denoising_loop,
)
from ltx_core.components.schedulers import distilled_sigmas
from ltx_core.types import LatentState


class Oracle:
    """Always predicts the same x0 per modality; records (sigma, step_index) of every call."""

    def __init__(self, video_x0: torch.Tensor | None, audio_x0: torch.Tensor | None) -> None:
        self.targets = (video_x0, audio_x0)
        self.calls: list[tuple[float, int]] = []

    def __call__(self, video, audio, sigma, step_index):
        self.calls.append((float(sigma), step_index))
        return tuple(None if s is None else t for s, t in zip((video, audio), self.targets))


def _state(tokens: int, seed: int, mask: torch.Tensor | None = None) -> LatentState:
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(1, tokens, 4, generator=g)
    clean = torch.randn(1, tokens, 4, generator=g)
    mask = torch.ones(1, tokens, 1) if mask is None else mask
    return LatentState(latent, mask, torch.zeros(1, 1, tokens, 2), clean)


def test_euler_loop_one_call_per_step_lands_on_blended_x0():
    mask = torch.tensor([1.0, 0.0, 0.5, 1.0]).view(1, 4, 1)
    video, audio = _state(4, 0, mask), _state(3, 1)
    target_v, target_a = torch.full((1, 4, 4), 3.0), torch.full((1, 3, 4), -1.0)
    oracle = Oracle(target_v, target_a)
    sigmas = distilled_sigmas()
    v, a = euler_denoising_loop(oracle, sigmas, video, audio)
    assert oracle.calls == [(float(s), i) for i, s in enumerate(sigmas[:-1])]
    torch.testing.assert_close(v.latent, blend_with_clean(target_v, video))
    torch.testing.assert_close(a.latent, target_a)
    torch.testing.assert_close(v.latent[:, 1], video.clean_latent[:, 1])  # mask 0 pinned to clean
    assert v.positions is video.positions and v.denoise_mask is video.denoise_mask


def test_euler_loop_with_one_modality_and_explicit_step():
    video = _state(4, 0)
    v, a = euler_denoising_loop(
        Oracle(torch.zeros(1, 4, 4), None), torch.tensor([1.0, 0.5, 0.0]), video, None, EulerStep()
    )
    assert a is None
    torch.testing.assert_close(v.latent, torch.zeros(1, 4, 4))
    with pytest.raises(ValueError, match="at least one"):
        euler_denoising_loop(Oracle(None, None), torch.tensor([1.0, 0.0]))


def test_distilled_composition_with_simple_denoiser(fake_model, modality_type):
    """The distilled stage: SimpleDenoiser(model) + Euler loop over the distilled sigmas."""
    video, audio = _state(4, 0), _state(3, 1)
    denoiser = SimpleDenoiser(fake_model, torch.ones(1, 2, 3), torch.ones(1, 2, 2), modality_type=modality_type)
    sigmas = distilled_sigmas()
    v, _ = euler_denoising_loop(denoiser, sigmas, video, audio)
    assert len(fake_model.calls) == len(sigmas) - 1
    # Replay the same recursion by hand: x0 = 0.5 x + 1, Euler update.
    x = video.latent
    for i in range(len(sigmas) - 1):
        x0 = x * 0.5 + 1.0
        x = x + (x - x0) / sigmas[i] * (sigmas[i + 1] - sigmas[i])
    torch.testing.assert_close(v.latent, x)


def test_ancestral_loop_is_seeded_and_ends_on_x0():
    video, audio = _state(4, 0), _state(3, 1)
    target = (torch.full((1, 4, 4), 2.0), torch.full((1, 3, 4), 1.0))
    sigmas = torch.tensor([1.0, 0.7, 0.4, 0.0])
    run = lambda seed: euler_ancestral_denoising_loop(
        Oracle(*target), sigmas, video, audio, EulerAncestralStep(), torch.Generator().manual_seed(seed)
    )
    v1, a1 = run(5)
    torch.testing.assert_close(v1.latent, target[0])
    torch.testing.assert_close(a1.latent, target[1])
    short = torch.tensor([1.0, 0.7, 0.4])
    mid = lambda seed: (
        euler_ancestral_denoising_loop(
            Oracle(*target), short, video, None, EulerAncestralStep(), torch.Generator().manual_seed(seed)
        )[0].latent
    )
    assert torch.equal(mid(5), mid(5)) and not torch.equal(mid(5), mid(6))
    with pytest.raises(ValueError, match="Generator"):
        euler_ancestral_denoising_loop(Oracle(*target), sigmas, video, audio)


def test_ancestral_loop_draws_named_noise_like_its_generator():
    """A named noise source serves the re-noise draws (video then audio per step, none on the last step);
    drawing them from a generator seeded alike gives the same states."""
    video, audio = _state(4, 0), _state(3, 1)
    target = (torch.full((1, 4, 4), 2.0), torch.full((1, 3, 4), 1.0))
    sigmas = torch.tensor([1.0, 0.7, 0.4, 0.1])
    generator = torch.Generator().manual_seed(3)
    names: list[str] = []

    def source(name, shape, *, device, dtype):
        names.append(name)
        return torch.randn(tuple(shape), generator=generator, dtype=dtype).to(device)

    named = euler_ancestral_denoising_loop(
        Oracle(*target), sigmas, video, audio, EulerAncestralStep(), noise=source, noise_name_prefix="stage_1."
    )
    seeded = euler_ancestral_denoising_loop(
        Oracle(*target), sigmas, video, audio, EulerAncestralStep(), torch.Generator().manual_seed(3)
    )
    assert names == [f"stage_1.ancestral.{i}.{m}" for i in range(3) for m in ("video", "audio")]
    for got, want in zip(named, seeded):
        torch.testing.assert_close(got.latent, want.latent, rtol=0, atol=0)


def test_gradient_estimation_loop_ends_on_x0():
    video = _state(4, 0)
    oracle = Oracle(torch.full((1, 4, 4), 0.5), None)
    v, _ = gradient_estimation_denoising_loop(oracle, torch.tensor([1.0, 0.6, 0.3, 0.0]), video)
    torch.testing.assert_close(v.latent, torch.full((1, 4, 4), 0.5))


def test_res2s_loop_two_calls_per_step_and_final_x0():
    mask = torch.tensor([1.0, 0.0, 1.0, 1.0]).view(1, 4, 1)
    video, audio = _state(4, 0, mask), _state(3, 1)
    target = (torch.full((1, 4, 4), 2.0), torch.full((1, 3, 4), -0.5))
    oracle = Oracle(*target)
    sigmas = torch.tensor([1.0, 0.8, 0.5, 0.0])
    v, a = res2s_denoising_loop(oracle, sigmas, video, audio, noise_seed=3)
    assert len(oracle.calls) == 2 * 3 + 1
    assert [i for _, i in oracle.calls] == [0, 0, 1, 0, 2, 0, 3]
    assert oracle.calls[-1][0] == pytest.approx(0.0011)
    torch.testing.assert_close(v.latent, blend_with_clean(target[0], video))
    torch.testing.assert_close(a.latent, target[1])
    again, _ = res2s_denoising_loop(Oracle(*target), sigmas[:-1], video, None, noise_seed=3)
    other, _ = res2s_denoising_loop(Oracle(*target), sigmas[:-1], video, None, noise_seed=4)
    assert not torch.equal(again.latent, other.latent)
    torch.testing.assert_close(again.latent[:, 1], video.clean_latent[:, 1])
    assert again.latent.dtype == video.latent.dtype


class GeneratorPairNoise:
    """A noise source serving res2s draws from two CPU generators chosen by the draw's kind, as the
    loop's own seeded generators do; records the names asked for."""

    def __init__(self, seed: int) -> None:
        self.generators = {
            "step": torch.Generator().manual_seed(seed),
            "substep": torch.Generator().manual_seed(seed + 10000),
        }
        self.names: list[str] = []

    def __call__(self, name, shape, *, device, dtype):
        self.names.append(name)
        kind = name.split(".")[-2]
        return torch.randn(tuple(shape), generator=self.generators[kind], dtype=dtype).to(device)


def test_res2s_loop_takes_named_draws_from_a_noise_source_in_the_reference_order():
    video, audio = _state(4, 0), _state(3, 1)
    target = (torch.full((1, 4, 4), 2.0), torch.full((1, 3, 4), -0.5))
    sigmas = torch.tensor([1.0, 0.8, 0.5, 0.2])
    source = GeneratorPairNoise(3)
    v, a = res2s_denoising_loop(Oracle(*target), sigmas, video, audio, noise=source, noise_name_prefix="stage_1.")
    assert source.names == [
        f"stage_1.res2s.{i}.{kind}.{modality}"
        for i in range(3)
        for kind in ("substep", "step")
        for modality in ("video", "audio")
    ]
    # Served the same raw draws, the source reproduces the loop's own seeded generators bit for bit.
    seeded_v, seeded_a = res2s_denoising_loop(Oracle(*target), sigmas, video, audio, noise_seed=3)
    assert torch.equal(v.latent, seeded_v.latent) and torch.equal(a.latent, seeded_a.latent)
    other, _ = res2s_denoising_loop(Oracle(*target), sigmas, video, audio, noise=GeneratorPairNoise(4))
    assert not torch.equal(other.latent, v.latent)


def test_normalized_noise_statistics():
    noise = normalized_noise(torch.zeros(2, 64, 8), torch.Generator().manual_seed(0))
    assert noise.dtype == torch.float64
    torch.testing.assert_close(noise.mean(dim=(-2, -1)), torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(noise.std(dim=(-2, -1)), torch.ones(2, dtype=torch.float64))
