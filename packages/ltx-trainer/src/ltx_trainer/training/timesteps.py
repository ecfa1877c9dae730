"""Noise levels (sigma) for training: shifted logit-normal (default) or uniform.

Shifted logit-normal: mu grows linearly with the sequence length (0.95 at 1024 tokens to 2.05 at 4096,
extrapolated beyond), n ~ N(mu, std), s = sigmoid(n) is stretched so the 0.5% and 99.9% percentiles of
the distribution map to 0 and 1, values below eps are reflected (2 eps - s) and the result clamped to
[0, 1]. With probability `uniform_prob` a sample is replaced by U(eps, 1), so every noise level is seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ltx_trainer.training.draws import Draws

NORMAL_005_PERCENTILE = -2.5758
NORMAL_999_PERCENTILE = 3.0902


class TimestepSampler(Protocol):
    def sample(self, batch: int, seq_len: int, draws: Draws, prefix: str, device: torch.device) -> torch.Tensor: ...


@dataclass(frozen=True)
class ShiftedLogitNormalSampler:
    std: float = 1.0
    eps: float = 1e-3
    uniform_prob: float = 0.1
    min_tokens: int = 1024
    max_tokens: int = 4096
    min_shift: float = 0.95
    max_shift: float = 2.05

    def mu(self, seq_len: int) -> float:
        slope = (self.max_shift - self.min_shift) / (self.max_tokens - self.min_tokens)
        return self.min_shift + (seq_len - self.min_tokens) * slope

    def sigmas_from(
        self, seq_len: int, normal: torch.Tensor, uniform: torch.Tensor, choice: torch.Tensor
    ) -> torch.Tensor:
        """The formula on given standard-normal / uniform / choice draws (each (B,))."""
        mu = self.mu(seq_len)
        s = torch.sigmoid(normal * self.std + mu)
        lo = torch.sigmoid(torch.tensor(mu + NORMAL_005_PERCENTILE * self.std, dtype=normal.dtype))
        hi = torch.sigmoid(torch.tensor(mu + NORMAL_999_PERCENTILE * self.std, dtype=normal.dtype))
        r = (s - lo) / (hi - lo)
        r = torch.where(r < self.eps, 2 * self.eps - r, r).clamp(0.0, 1.0)
        u = (1 - self.eps) * uniform + self.eps
        return torch.where(choice > self.uniform_prob, r, u)

    def sample(self, batch: int, seq_len: int, draws: Draws, prefix: str, device: torch.device) -> torch.Tensor:
        f32 = torch.float32
        normal = draws.randn(f"{prefix}sigma_normal", (batch,), device, f32)
        uniform = draws.rand(f"{prefix}sigma_uniform", (batch,), device, f32)
        choice = draws.rand(f"{prefix}sigma_choice", (batch,), device, f32)
        return self.sigmas_from(seq_len, normal, uniform, choice)


@dataclass(frozen=True)
class UniformSampler:
    min_value: float = 0.0
    max_value: float = 1.0

    def sample(self, batch: int, seq_len: int, draws: Draws, prefix: str, device: torch.device) -> torch.Tensor:
        u = draws.rand(f"{prefix}sigma_uniform", (batch,), device, torch.float32)
        return self.min_value + (self.max_value - self.min_value) * u


_PARAMS = {
    "shifted_logit_normal": {"std", "eps", "uniform_prob", "min_tokens", "max_tokens", "min_shift", "max_shift"},
    "uniform": {"min_value", "max_value"},
}


def make_sampler(mode: str, params: Mapping[str, Any] | None = None) -> TimestepSampler:
    params = dict(params or {})
    if mode not in _PARAMS:
        raise ValueError(f"flow_matching.timestep_sampling_mode {mode!r} (accepted: {sorted(_PARAMS)})")
    unknown = set(params) - _PARAMS[mode]
    if unknown:
        raise ValueError(
            f"flow_matching.timestep_sampling_params {sorted(unknown)} are not parameters of {mode!r} "
            f"(accepted: {sorted(_PARAMS[mode])})"
        )
    return ShiftedLogitNormalSampler(**params) if mode == "shifted_logit_normal" else UniformSampler(**params)
