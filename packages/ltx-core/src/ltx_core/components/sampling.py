"""Sampling loops over a sigma schedule for the joint audio-video state.

Every loop takes a denoiser `denoiser(video_state, audio_state, sigma, step_index) -> (video_x0, audio_x0)`
(see `components.denoisers`), the sigmas, and the states (either may be None), and returns the final
states. After every model call the x0 prediction is pulled back to the clean latent where the denoise
mask says so:  x0 <- x0 * mask + clean * (1 - mask).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from tqdm.auto import tqdm

from ltx_core.components.denoisers import Denoiser
from ltx_core.components.diffusion_steps import (
    DiffusionStep,
    EulerAncestralStep,
    EulerStep,
    GradientEstimationEulerStep,
    Res2sStep,
    res2s_coefficients,
)
from ltx_core.components.noisers import NoiseSource
from ltx_core.types import LatentState

States = tuple[LatentState | None, LatentState | None]
NoiseFn = Callable[[torch.Tensor, torch.Generator], torch.Tensor]

# res2s replaces a final 0 sigma by this small value for its last full step (then one plain x0 call).
RES2S_FINAL_SIGMA = 0.0011


def blend_with_clean(denoised: torch.Tensor, state: LatentState) -> torch.Tensor:
    """x0 * mask + clean * (1 - mask): tokens with mask 0 are pinned to their clean (conditioning) value."""
    mask = state.denoise_mask
    return (denoised * mask + state.clean_latent.float() * (1 - mask)).to(denoised.dtype)


def _check(sigmas: torch.Tensor, video: LatentState | None, audio: LatentState | None) -> None:
    if video is None and audio is None:
        raise ValueError("sampling needs at least one of the video and audio states")
    if sigmas.dim() != 1 or len(sigmas) < 2:
        raise ValueError(f"sigmas must be a 1-D schedule with at least 2 values, got shape {tuple(sigmas.shape)}")


def _steps(n: int, progress: bool, desc: str) -> range | tqdm:
    return tqdm(range(n), desc=desc, disable=not progress)


def euler_denoising_loop(
    denoiser: Denoiser,
    sigmas: torch.Tensor,
    video: LatentState | None = None,
    audio: LatentState | None = None,
    step: DiffusionStep | None = None,
    progress: bool = False,
) -> States:
    """One denoiser call per step, x0 blended with the clean latent, then `step` (Euler by default).

    With `SimpleDenoiser` this is the distilled loop; with `GuidedDenoiser` the guided one.
    """
    _check(sigmas, video, audio)
    step = step or EulerStep()
    for i in _steps(len(sigmas) - 1, progress, "denoising"):
        video_x0, audio_x0 = denoiser(video, audio, sigmas[i], i)
        if video is not None and video_x0 is not None:
            video = replace(video, latent=step.step(video.latent, blend_with_clean(video_x0, video), sigmas, i))
        if audio is not None and audio_x0 is not None:
            audio = replace(audio, latent=step.step(audio.latent, blend_with_clean(audio_x0, audio), sigmas, i))
    return video, audio


def plain_noise(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device)


def ancestral_noise_name(step: int, modality: str) -> str:
    """The name of the ancestral loop's re-noise draw of `step` for `modality` (video | audio)."""
    return f"ancestral.{step}.{modality}"


def euler_ancestral_denoising_loop(
    denoiser: Denoiser,
    sigmas: torch.Tensor,
    video: LatentState | None = None,
    audio: LatentState | None = None,
    step: EulerAncestralStep | None = None,
    generator: torch.Generator | None = None,
    noise_fn: NoiseFn = plain_noise,
    progress: bool = False,
    noise: NoiseSource | None = None,
    noise_name_prefix: str = "",
) -> States:
    """Ancestral Euler loop: fresh noise each step (video drawn before audio from one generator), the
    re-noised sample pulled back to the clean latent by the mask; the last step returns x0.

    The re-noise comes from `generator` through `noise_fn`, or from a named `noise` source instead (draw
    names `noise_name_prefix + ancestral_noise_name(step, modality)`, in the state's dtype and device), so a
    pipeline can seed or replay them like its other draws."""
    _check(sigmas, video, audio)
    step = step or EulerAncestralStep()
    if step.eta > 0 and generator is None and noise is None:
        raise ValueError("ancestral sampling with eta > 0 needs a seeded torch.Generator or a noise source")

    def draw(i: int, modality: str, like: torch.Tensor) -> torch.Tensor:
        if noise is None:
            assert generator is not None
            return noise_fn(like, generator)
        name = noise_name_prefix + ancestral_noise_name(i, modality)
        return noise(name, like.shape, device=like.device, dtype=like.dtype)

    for i in _steps(len(sigmas) - 1, progress, "ancestral denoising"):
        x0s = denoiser(video, audio, sigmas[i], i)
        new: list[LatentState | None] = []
        for modality, state, x0 in zip(("video", "audio"), (video, audio), x0s):
            if state is None or x0 is None:
                new.append(state)
                continue
            x0 = blend_with_clean(x0.float(), state)
            if sigmas[i + 1] == 0:
                new.append(replace(state, latent=x0.to(state.latent.dtype)))
                continue
            renoise = draw(i, modality, state.latent) if step.eta > 0 else None
            x_next = step.step(state.latent.float(), x0, sigmas, i, renoise)
            if renoise is not None:
                x_next = blend_with_clean(x_next, state)
            new.append(replace(state, latent=x_next.to(state.latent.dtype)))
        video, audio = new
    return video, audio


def gradient_estimation_denoising_loop(
    denoiser: Denoiser,
    sigmas: torch.Tensor,
    video: LatentState | None = None,
    audio: LatentState | None = None,
    step: GradientEstimationEulerStep | None = None,
    progress: bool = False,
) -> States:
    """Euler loop with the gradient-estimation velocity correction (each modality keeps its last velocity)."""
    _check(sigmas, video, audio)
    step = step or GradientEstimationEulerStep()
    velocities: list[torch.Tensor | None] = [None, None]
    for i in _steps(len(sigmas) - 1, progress, "denoising (gradient estimation)"):
        x0s = denoiser(video, audio, sigmas[i], i)
        new: list[LatentState | None] = []
        for k, (state, x0) in enumerate(zip((video, audio), x0s)):
            if state is None or x0 is None:
                new.append(state)
                continue
            x_next, velocities[k] = step.step(state.latent, blend_with_clean(x0, state), sigmas, i, velocities[k])
            new.append(replace(state, latent=x_next))
        video, audio = new
    return video, audio


def normalize_noise(noise: torch.Tensor) -> torch.Tensor:
    """Zero mean / unit std (unbiased) over the whole tensor, then again over the last two dims."""
    noise = (noise - noise.mean()) / noise.std()
    return (noise - noise.mean(dim=(-2, -1), keepdim=True)) / noise.std(dim=(-2, -1), keepdim=True)


def normalized_noise(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Standard-normal noise drawn in float64 (float32 on MPS) on the generator's device, normalised to
    zero mean / unit std over the whole tensor, then again over the last two dims."""
    dtype = torch.float32 if generator.device.type == "mps" else torch.float64
    return normalize_noise(torch.randn(like.shape, generator=generator, dtype=dtype, device=generator.device))


def res2s_noise_name(step: int, kind: str, modality: str) -> str:
    """The name of one res2s SDE draw: `res2s.<step>.<substep|step>.<video|audio>`."""
    return f"res2s.{step}.{kind}.{modality}"


_MODALITIES = ("video", "audio")


@dataclass(frozen=True)
class _Res2sNoise:
    """res2s's SDE re-noise: two `Res2sStep`s (substep eta 0.5, step eta) fed either by the loop's own
    generators (keyed "step" / "substep") or by a named noise `source`."""

    device: torch.device
    dtype: torch.dtype
    sdes: dict[str, Res2sStep]
    generators: dict[str, torch.Generator]
    source: NoiseSource | None
    prefix: str

    @classmethod
    def create(
        cls,
        device: torch.device,
        dtype: torch.dtype,
        eta: float,
        seeds: tuple[int, int | None],
        source: NoiseSource | None,
        prefix: str,
    ) -> _Res2sNoise:
        generators: dict[str, torch.Generator] = {}
        if source is None:
            step_seed, substep_seed = seeds
            generators["step"] = torch.Generator(device=device).manual_seed(step_seed)
            generators["substep"] = torch.Generator(device=device).manual_seed(
                step_seed + 10000 if substep_seed is None else substep_seed
            )
        sdes = {"step": Res2sStep(eta), "substep": Res2sStep(0.5)}
        return cls(device, dtype, sdes, generators, source, prefix)

    def draw(self, step: int, kind: str, modality: str, like: torch.Tensor) -> torch.Tensor:
        if self.source is None:
            return normalized_noise(like, self.generators[kind]).to(device=self.device, dtype=self.dtype)
        name = self.prefix + res2s_noise_name(step, kind, modality)
        return normalize_noise(self.source(name, like.shape, device=self.device, dtype=self.dtype))

    def renoise(
        self, state: LatentState, anchor: torch.Tensor, target: torch.Tensor, pair: torch.Tensor, at: _Res2sAt
    ) -> torch.Tensor:
        """`target` re-noised across `pair` (SDE kind and draw name from `at`), then pulled back to clean."""
        x = self.sdes[at.kind].step(anchor, target, pair, 0, self.draw(at.step, at.kind, at.modality, state.latent))
        return blend_with_clean(x, state)


@dataclass(frozen=True)
class _Res2sAt:
    """Which draw a re-noise uses: step index, "substep" | "step", modality."""

    step: int
    kind: str
    modality: str


@dataclass(frozen=True)
class _Res2sStepSigmas:
    """One res2s step's sigmas (high precision) and RK coefficients."""

    index: int
    sigma: torch.Tensor
    pair: torch.Tensor  # (sigma, sigma_next)
    sub_sigma: torch.Tensor  # geometric mean of the pair: where the midpoint evaluation sits
    h: float
    coefficients: tuple[float, float, float]  # (a21, b1, b2)

    @classmethod
    def at(cls, sig_hp: torch.Tensor, hs: torch.Tensor, i: int) -> _Res2sStepSigmas:
        sigma, sigma_next = sig_hp[i], sig_hp[i + 1]
        h = float(hs[i])
        return cls(i, sigma, sig_hp[i : i + 2], torch.sqrt(sigma * sigma_next), h, res2s_coefficients(h))


@dataclass(frozen=True)
class _Res2sMidpoint:
    """First stage of one modality: the (refined) anchor, its first slope and the re-noised midpoint state."""

    anchor: torch.Tensor
    eps: torch.Tensor
    state: LatentState


def _res2s_midpoint(
    state: LatentState, x0: torch.Tensor, step: _Res2sStepSigmas, noise: _Res2sNoise, modality: str, refine: int
) -> _Res2sMidpoint:
    a21 = step.coefficients[0]
    x0 = blend_with_clean(x0, state).to(noise.dtype)
    anchor = state.latent.to(noise.dtype)
    eps = x0 - anchor
    sub_pair = torch.stack([step.sigma, step.sub_sigma])
    at = _Res2sAt(step.index, "substep", modality)
    x_mid = noise.renoise(state, anchor, anchor + step.h * a21 * eps, sub_pair, at)
    # bongmath fixed point: find the anchor whose first-stage update lands exactly on x_mid.
    for _ in range(refine):
        anchor = x_mid - step.h * a21 * eps
        eps = x0 - anchor
    return _Res2sMidpoint(anchor, eps, replace(state, latent=x_mid.to(state.latent.dtype)))


def _res2s_advance(
    state: LatentState, x0: torch.Tensor, mid: _Res2sMidpoint, step: _Res2sStepSigmas, noise: _Res2sNoise, modality: str
) -> LatentState:
    _, b1, b2 = step.coefficients
    eps2 = blend_with_clean(x0, state).to(noise.dtype) - mid.anchor
    x_next = mid.anchor + step.h * (b1 * mid.eps + b2 * eps2)
    x_next = noise.renoise(state, mid.anchor, x_next, step.pair, _Res2sAt(step.index, "step", modality))
    return replace(state, latent=x_next.to(state.latent.dtype))


def _res2s_step(
    denoiser: Denoiser,
    states: dict[str, LatentState | None],
    sigma: torch.Tensor,
    step: _Res2sStepSigmas,
    noise: _Res2sNoise,
    refine: int,
) -> dict[str, LatentState | None]:
    """One res2s step: x0 at `sigma` (the schedule's own dtype), midpoints, x0 there, the combined update."""
    x0_first = dict(zip(_MODALITIES, denoiser(states["video"], states["audio"], sigma, step.index)))
    mids: dict[str, _Res2sMidpoint] = {}
    for name in _MODALITIES:
        state, x0 = states[name], x0_first[name]
        if state is not None and x0 is not None:
            mids[name] = _res2s_midpoint(state, x0, step, noise, name, refine)
    mid_states = {name: mids[name].state if name in mids else None for name in _MODALITIES}
    x0_second = dict(zip(_MODALITIES, denoiser(mid_states["video"], mid_states["audio"], step.sub_sigma.float(), 0)))
    new = dict(states)
    for name, mid in mids.items():
        state, x0 = states[name], x0_second[name]
        if state is not None and x0 is not None:
            new[name] = _res2s_advance(state, x0, mid, step, noise, name)
    return new


def res2s_denoising_loop(
    denoiser: Denoiser,
    sigmas: torch.Tensor,
    video: LatentState | None = None,
    audio: LatentState | None = None,
    noise_seed: int = 0,
    substep_noise_seed: int | None = None,
    eta: float = 0.5,
    bongmath: bool = True,
    bongmath_max_iter: int = 100,
    noise: NoiseSource | None = None,
    noise_name_prefix: str = "",
    progress: bool = False,
) -> States:
    """res_2s: second-order exponential Runge-Kutta with SDE noise, two denoiser calls per step.

    Per step i with h = log(sigma_i / sigma_{i+1}) and (a21, b1, b2) = res2s_coefficients(h):
        x0_1 = D(x, sigma_i);  x_mid = x + h a21 (x0_1 - x), re-noised by `Res2sStep(0.5)` to
               sub_sigma = sqrt(sigma_i sigma_{i+1}) (substep noise generator)
        (bongmath: when h < 0.5 and sigma_i > 0.03, refine the anchor x so that x_mid is consistent)
        x0_2 = D(x_mid, sub_sigma);  x_next = x + h (b1 (x0_1 - x) + b2 (x0_2 - x)),
               re-noised by `Res2sStep(eta)` to sigma_{i+1} (step noise generator)
    A final 0 sigma is replaced by 0.0011 for the last full step, followed by one plain x0 call.
    The RK arithmetic runs in float64 (float32 on MPS); states keep their dtype.

    SDE noise: raw standard-normal draws in the state's token layout, normalised by `normalize_noise`,
    made per step in the order substep video, substep audio, step video, step audio. By default they
    come from two generators of their own on the state's device, seeded `noise_seed` (steps) and
    `substep_noise_seed` (default `noise_seed + 10000`), independent of any pipeline seed. A `noise`
    source replaces both: draw i's names are `noise_name_prefix + res2s_noise_name(i, kind, modality)`.
    """
    _check(sigmas, video, audio)
    present = video if video is not None else audio
    device = present.latent.device
    hp = torch.float32 if device.type == "mps" else torch.float64
    sde = _Res2sNoise.create(device, hp, eta, (noise_seed, substep_noise_seed), noise, noise_name_prefix)

    n_full = len(sigmas) - 1
    ends_at_zero = bool(sigmas[-1] == 0)
    if ends_at_zero:
        sigmas = torch.cat([sigmas[:-1], sigmas.new_tensor([RES2S_FINAL_SIGMA, 0.0])])
    sig_hp = sigmas.to(hp)
    hs = -torch.log(sig_hp[1:].cpu() / sig_hp[:-1].cpu())

    states: dict[str, LatentState | None] = {"video": video, "audio": audio}
    for i in _steps(n_full, progress, "res2s denoising"):
        step = _Res2sStepSigmas.at(sig_hp, hs, i)
        refine = bongmath_max_iter if bongmath and step.h < 0.5 and float(step.sigma) > 0.03 else 0
        states = _res2s_step(denoiser, states, sigmas[i], step, sde, refine)

    if ends_at_zero:
        final = dict(zip(_MODALITIES, denoiser(states["video"], states["audio"], sigmas[n_full], n_full)))
        for name in _MODALITIES:
            state, x0 = states[name], final[name]
            if state is not None and x0 is not None:
                states[name] = replace(state, latent=blend_with_clean(x0, state).to(state.latent.dtype))
    return states["video"], states["audio"]
