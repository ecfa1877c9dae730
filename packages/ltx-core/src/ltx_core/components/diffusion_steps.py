"""One sampler update from sigma_i to sigma_{i+1}, given the sample x and the model's x0 prediction.

Rectified flow: x = (1 - sigma) * x0 + sigma * noise, velocity v = (x - x0) / sigma.
Each step is a small stateless object whose docstring gives its formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch


class DiffusionStep(Protocol):
    def step(
        self,
        sample: torch.Tensor,
        denoised: torch.Tensor,
        sigmas: torch.Tensor,
        step_index: int,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor: ...


def _sigma_pair(sigmas: torch.Tensor, step_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not 0 <= step_index < len(sigmas) - 1:
        raise ValueError(f"step_index must be in [0, {len(sigmas) - 2}] for {len(sigmas)} sigmas, got {step_index}")
    return sigmas[step_index], sigmas[step_index + 1]


def velocity_of(sample: torch.Tensor, denoised: torch.Tensor, sigma: float | torch.Tensor) -> torch.Tensor:
    """(x - x0) / sigma in float32, returned in the sample's dtype."""
    sigma = float(sigma)
    if sigma == 0:
        raise ValueError("the velocity is undefined at sigma 0")
    return ((sample.float() - denoised.float()) / sigma).to(sample.dtype)


@dataclass(frozen=True)
class EulerStep:
    """x_{i+1} = x + (x - x0) / sigma_i * (sigma_{i+1} - sigma_i), in float32.

    At sigma_{i+1} = 0 this lands on x0 (up to rounding).
    """

    def step(
        self,
        sample: torch.Tensor,
        denoised: torch.Tensor,
        sigmas: torch.Tensor,
        step_index: int,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sigma, sigma_next = _sigma_pair(sigmas, step_index)
        velocity = velocity_of(sample, denoised, sigma)
        return (sample.float() + velocity.float() * (sigma_next - sigma)).to(sample.dtype)


@dataclass(frozen=True)
class EulerAncestralStep:
    """Ancestral Euler for rectified flow (alpha = 1 - sigma), in float32.

        sigma_down = sigma_{i+1} * (1 + (sigma_{i+1} / sigma_i - 1) * eta)
        x' = (sigma_down / sigma_i) * x + (1 - sigma_down / sigma_i) * x0          deterministic part
        r = sqrt(max(0, sigma_{i+1}^2 - sigma_down^2 a_next^2 / a_down^2))
        x_{i+1} = (a_next / a_down) * x' + s_noise * r * noise
    with a = 1 - sigma. Returns x0 when sigma_{i+1} = 0. eta = 0 is plain Euler; eta = 1 fully ancestral.
    """

    eta: float = 1.0
    s_noise: float = 1.0

    def step(
        self,
        sample: torch.Tensor,
        denoised: torch.Tensor,
        sigmas: torch.Tensor,
        step_index: int,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sigma, sigma_next = (s.float() for s in _sigma_pair(sigmas, step_index))
        if sigma_next == 0:
            return denoised.to(sample.dtype)
        if self.eta > 0 and noise is None:
            raise ValueError(f"ancestral Euler with eta {self.eta} > 0 needs a noise tensor")
        x = sample.float()
        x0 = denoised.float()
        sigma_down = sigma_next * (1.0 + (sigma_next / sigma - 1.0) * self.eta)
        ratio = sigma_down / sigma
        x_next = ratio * x + (1.0 - ratio) * x0
        if self.eta > 0:
            alpha_next = 1.0 - sigma_next
            alpha_down = 1.0 - sigma_down
            renoise = (sigma_next**2 - sigma_down**2 * alpha_next**2 / alpha_down**2).clamp(min=0) ** 0.5
            x_next = (alpha_next / alpha_down) * x_next + noise.float() * self.s_noise * renoise
        return x_next.to(sample.dtype)


def res2s_sde_coefficients(sigma_next: torch.Tensor, eta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(alpha_ratio, sigma_down, sigma_up) of a variance-preserving re-noise to sigma_next.

    sigma_up = min(eta * sigma_next, 0.9999 * sigma_next)
    r = sqrt(max(0, sigma_next^2 - sigma_up^2))
    alpha_ratio = (1 - sigma_next) + r,   sigma_down = r / alpha_ratio
    """
    sigma_up = torch.minimum(sigma_next * eta, sigma_next * 0.9999)
    residual = (sigma_next**2 - sigma_up**2).clamp(min=0) ** 0.5
    alpha_ratio = (1 - sigma_next) + residual
    sigma_down = residual / alpha_ratio
    # 0/0 only at sigma_next = 0 and alpha 0, where the step returns early anyway; keep values finite.
    sigma_down = torch.where(torch.isnan(sigma_down), sigma_next, sigma_down)
    return torch.nan_to_num(alpha_ratio, nan=1.0), sigma_down, torch.nan_to_num(sigma_up, nan=0.0)


@dataclass(frozen=True)
class Res2sStep:
    """SDE re-noising step of the res_2s sampler.

    `denoised` is the deterministic estimate of the sample at sigma_{i+1} (the RK combination the loop
    computed); this step swaps part of its noise for fresh noise:
        eps = (x - denoised) / (sigma_i - sigma_{i+1}),   x0' = x - sigma_i * eps
        x_{i+1} = alpha_ratio * (x0' + sigma_down * eps) + sigma_up * noise
    with (alpha_ratio, sigma_down, sigma_up) from `res2s_sde_coefficients(sigma_{i+1}, eta)`.
    Returns `denoised` unchanged when sigma_{i+1} = 0 or eta = 0. Computed in the sigmas' dtype.
    """

    eta: float = 0.5

    def step(
        self,
        sample: torch.Tensor,
        denoised: torch.Tensor,
        sigmas: torch.Tensor,
        step_index: int,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sigma, sigma_next = _sigma_pair(sigmas, step_index)
        alpha_ratio, sigma_down, sigma_up = res2s_sde_coefficients(sigma_next, self.eta)
        if sigma_up == 0 or sigma_next == 0:
            return denoised
        if noise is None:
            raise ValueError(f"res2s step with eta {self.eta} > 0 needs a noise tensor")
        eps = (sample - denoised) / (sigma - sigma_next)
        x0 = sample - sigma * eps
        return (alpha_ratio * (x0 + sigma_down * eps) + sigma_up * noise).to(denoised.dtype)


def phi(j: int, z: float) -> float:
    """phi_j(z) = (e^z - sum_{k<j} z^k / k!) / z^j, phi_j(0) = 1 / j!.

    phi_1(z) = (e^z - 1) / z,  phi_2(z) = (e^z - 1 - z) / z^2.
    """
    if abs(z) < 1e-10:
        return 1.0 / math.factorial(j)
    head = sum(z**k / math.factorial(k) for k in range(j))
    return (math.exp(z) - head) / z**j


def res2s_coefficients(h: float, c2: float = 0.5) -> tuple[float, float, float]:
    """Exponential-integrator RK2 weights for a log-sigma step h = log(sigma_i / sigma_{i+1}):

    a21 = c2 * phi_1(-h c2)        substep:  x_mid = x + h * a21 * (x0_1 - x)
    b2 = phi_2(-h) / c2,  b1 = phi_1(-h) - b2
                                   full step: x_next = x + h * (b1 (x0_1 - x) + b2 (x0_2 - x))
    """
    a21 = c2 * phi(1, -h * c2)
    b2 = phi(2, -h) / c2
    b1 = phi(1, -h) - b2
    return a21, b1, b2


@dataclass(frozen=True)
class GradientEstimationEulerStep:
    """Euler with a gradient-estimation velocity correction (https://openreview.net/pdf?id=o2ND9v0CeK).

        v = (x - x0) / sigma_i
        v' = gamma * (v - v_prev) + v_prev            when a previous velocity exists, else v' = v
        x_{i+1} = x + v' * (sigma_{i+1} - sigma_i)
    Returns (x_{i+1}, v): the caller passes v back as `previous_velocity` next step. At sigma_{i+1} = 0
    it returns x0 (and v unchanged).
    """

    gamma: float = 2.0

    def step(
        self,
        sample: torch.Tensor,
        denoised: torch.Tensor,
        sigmas: torch.Tensor,
        step_index: int,
        previous_velocity: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        sigma, sigma_next = _sigma_pair(sigmas, step_index)
        if sigma_next == 0:
            return denoised.to(sample.dtype), previous_velocity
        velocity = velocity_of(sample, denoised, sigma)
        if previous_velocity is not None:
            corrected = self.gamma * (velocity - previous_velocity) + previous_velocity
            # Fold the corrected velocity back into an x0 estimate, then take the plain Euler step.
            denoised = (sample.float() - corrected.float() * float(sigma)).to(sample.dtype)
        return EulerStep().step(sample, denoised, sigmas, step_index), velocity
