"""Noise-level (sigma) schedules: the token-count-shifted LTX-2 schedule and the distilled tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# Sigmas of the distilled checkpoints: 8 steps from pure noise (stage 1) and the 3-step refinement
# (stage 2) that starts from an upsampled latent re-noised to its first value.
DISTILLED_SIGMA_VALUES: tuple[float, ...] = (1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0)
STAGE_2_DISTILLED_SIGMA_VALUES: tuple[float, ...] = (0.909375, 0.725, 0.421875, 0.0)

# Token counts at which the shift equals base_shift and max_shift (linear in between and beyond).
BASE_SHIFT_TOKENS = 1024
MAX_SHIFT_TOKENS = 4096


def distilled_sigmas(device: torch.device | str | None = None) -> torch.Tensor:
    return torch.tensor(DISTILLED_SIGMA_VALUES, dtype=torch.float32, device=device)


def stage_2_distilled_sigmas(device: torch.device | str | None = None) -> torch.Tensor:
    return torch.tensor(STAGE_2_DISTILLED_SIGMA_VALUES, dtype=torch.float32, device=device)


def token_count_of(latent_shape: Sequence[int] | torch.Size) -> int:
    """Tokens of a latent (B, C, *grid): the product of the grid dims."""
    if len(latent_shape) < 3:
        raise ValueError(f"latent shape must be (B, C, *grid), got {tuple(latent_shape)}")
    return math.prod(latent_shape[2:])


@dataclass(frozen=True)
class LTX2Scheduler:
    """Shifted, optionally stretched flow-matching schedule (float32, steps + 1 values, last 0).

    With s_i = linspace(1, 0, steps + 1) and N tokens:
        shift = N * m + b,  m = (max_shift - base_shift) / (4096 - 1024),  b = base_shift - 1024 * m
        s_i <- e^shift / (e^shift + 1/s_i - 1)                  (s_i != 0)
    and with `stretch`, z = 1 - s over the non-zero entries is rescaled so the last non-zero sigma
    equals `terminal`:  s <- 1 - z * (1 - terminal) / z_last.
    Larger videos (more tokens) spend more steps at high noise.
    """

    max_shift: float = 2.05
    base_shift: float = 0.95
    stretch: bool = True
    terminal: float = 0.1
    default_tokens: int = MAX_SHIFT_TOKENS

    def __post_init__(self) -> None:
        if not 0.0 <= self.terminal < 1.0:
            raise ValueError(f"terminal sigma must be in [0, 1), got {self.terminal}")

    def shift(self, tokens: int) -> float:
        slope = (self.max_shift - self.base_shift) / (MAX_SHIFT_TOKENS - BASE_SHIFT_TOKENS)
        return tokens * slope + (self.base_shift - slope * BASE_SHIFT_TOKENS)

    def sigmas(
        self,
        steps: int,
        tokens: int | None = None,
        latent_shape: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """`steps + 1` sigmas for `tokens` (or the token count of `latent_shape`; default 4096)."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        if tokens is not None and latent_shape is not None:
            raise ValueError("pass either tokens or latent_shape, not both")
        if latent_shape is not None:
            tokens = token_count_of(latent_shape)
        if tokens is None:
            tokens = self.default_tokens
        if tokens < 1:
            raise ValueError(f"token count must be positive, got {tokens}")

        exp_shift = math.exp(self.shift(tokens))
        grid = torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float32)
        sigmas = torch.where(grid != 0, exp_shift / (exp_shift + (1 / grid - 1)), torch.zeros_like(grid))
        if self.stretch:
            nonzero = sigmas != 0
            one_minus = 1.0 - sigmas[nonzero]
            scale = one_minus[-1] / (1.0 - self.terminal)
            sigmas[nonzero] = 1.0 - one_minus / scale
        return sigmas.to(device=device, dtype=torch.float32)
