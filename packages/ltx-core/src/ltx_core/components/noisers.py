"""Initial noising of a latent state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import torch

from ltx_core.types import LatentState


class NoiseSource(Protocol):
    """Named standard-normal draws: a seeded generator, or tensors replayed from a recorded run.

    Draw names say where the noise goes (`stage_1.video`, `stage_2.res2s.0.substep.audio`, ...),
    so a replay can serve each stored draw to the place that consumed it in the recorded run.
    """

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """Standard normal noise of `shape` for the draw called `name`."""
        ...


def add_noise(state: LatentState, noise: torch.Tensor, noise_scale: float = 1.0) -> LatentState:
    """Noise a state with the given standard-normal `noise` (same shape as its tokens).

        x = lerp(latent, noise, noise_scale)      move the current tokens `noise_scale` of the way to noise
        x = lerp(clean, x, denoise_mask)          tokens with mask 0 stay clean, partial masks blend

    Computed in float32, returned in the latent's dtype.
    """
    if noise.shape != state.latent.shape:
        raise ValueError(f"noise has shape {tuple(noise.shape)}, the state's tokens {tuple(state.latent.shape)}")
    if not 0.0 <= noise_scale <= 1.0:
        raise ValueError(f"noise_scale must be in [0, 1], got {noise_scale}")
    noisy = torch.lerp(state.latent.float(), noise.to(state.latent.device).float(), noise_scale)
    noisy = torch.lerp(state.clean_latent.float(), noisy, state.denoise_mask.float())
    return replace(state, latent=noisy.to(state.latent.dtype))


class GaussianNoiser:
    """Draws standard-normal noise from a seeded generator and applies `add_noise`.

    The draw is `torch.randn(tokens.shape, dtype=latent dtype, device=latent device, generator=...)`,
    so one generator seeded once and used for video then audio reproduces the reference's noise.
    Pass `noise=` to replay stored noise instead of drawing (the generator is then left untouched).
    """

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    @classmethod
    def from_seed(cls, seed: int, device: torch.device | str = "cpu") -> GaussianNoiser:
        return cls(torch.Generator(device=device).manual_seed(seed))

    def sample(self, like: torch.Tensor) -> torch.Tensor:
        return torch.randn(like.shape, device=like.device, dtype=like.dtype, generator=self.generator)

    def __call__(
        self,
        state: LatentState,
        noise_scale: float = 1.0,
        noise: torch.Tensor | None = None,
    ) -> LatentState:
        if noise is None:
            noise = self.sample(state.latent)
        return add_noise(state, noise, noise_scale)
