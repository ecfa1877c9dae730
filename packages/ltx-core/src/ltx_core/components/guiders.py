"""Guidance: combine conditional and "unconditional" x0 predictions into a guided prediction.

Delta guiders return a term to add to the conditional prediction, so several can be summed:
    CFG    (s - 1) * (cond - uncond)
    CFG*   (s - 1) * (cond - p * uncond),  p = <cond, uncond> / |uncond|^2 per sample (zero-star rescaling)
    STG    s * (cond - perturbed)          perturbed = prediction with self-attention skipped in some blocks
    APG    adaptive projected guidance (see `APGGuider`)
`MultiModalGuider` combines CFG, STG, modality isolation and rescaling for one modality of the
audio-video model, as the pipelines use it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ltx_core.components.guider_params import MultiModalGuiderParams

_PROJECTION_EPS = 1e-8


def projection_coef(vector: torch.Tensor, onto: torch.Tensor) -> torch.Tensor:
    """(B, 1): <a, b> / (|b|^2 + 1e-8) per sample, over all non-batch elements."""
    batch = vector.shape[0]
    a = vector.reshape(batch, -1)
    b = onto.reshape(batch, -1)
    return (a * b).sum(dim=1, keepdim=True) / ((b**2).sum(dim=1, keepdim=True) + _PROJECTION_EPS)


def _per_sample(coef: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return coef.reshape(coef.shape[0], *([1] * (like.dim() - 1)))


@dataclass(frozen=True)
class CFGGuider:
    """Classifier-free guidance: (scale - 1) * (cond - uncond). scale 1 = off."""

    scale: float

    def delta(self, cond: torch.Tensor, uncond: torch.Tensor) -> torch.Tensor:
        return (self.scale - 1) * (cond - uncond)

    def enabled(self) -> bool:
        return self.scale != 1.0


@dataclass(frozen=True)
class CFGStarGuider:
    """CFG with the unconditional prediction first scaled onto the conditional one (CFG-Zero*).

    delta = (scale - 1) * (cond - p * uncond), p = projection_coef(cond, uncond): removing the part of
    the offset that only changes the magnitude keeps the guided sample closer to the data manifold.
    """

    scale: float

    def delta(self, cond: torch.Tensor, uncond: torch.Tensor) -> torch.Tensor:
        coef = _per_sample(projection_coef(cond, uncond), uncond)
        return (self.scale - 1) * (cond - coef * uncond)

    def enabled(self) -> bool:
        return self.scale != 1.0


@dataclass(frozen=True)
class STGGuider:
    """Spatio-temporal guidance: scale * (cond - perturbed). scale 0 = off."""

    scale: float

    def delta(self, cond: torch.Tensor, perturbed: torch.Tensor) -> torch.Tensor:
        return self.scale * (cond - perturbed)

    def enabled(self) -> bool:
        return self.scale != 0.0


@dataclass(frozen=True)
class APGGuider:
    """Adaptive projected guidance.

        g = cond - uncond
        g *= min(1, norm_threshold / |g|)      when norm_threshold > 0; |g| is the L2 norm over the
                                               last three dims (kept as in the reference)
        p = projection_coef(g, cond)           split g into a part parallel to cond and the rest
        delta = (scale - 1) * (eta * p * cond + (g - p * cond))
    `eta` < 1 damps the parallel part, which mostly over-saturates; the orthogonal part carries the
    prompt's direction.
    """

    scale: float
    eta: float = 1.0
    norm_threshold: float = 0.0

    def delta(self, cond: torch.Tensor, uncond: torch.Tensor) -> torch.Tensor:
        guidance = cond - uncond
        if self.norm_threshold > 0:
            norm = guidance.norm(p=2, dim=[-1, -2, -3], keepdim=True)
            guidance = guidance * torch.clamp(self.norm_threshold / norm, max=1.0)
        parallel = _per_sample(projection_coef(guidance, cond), cond) * cond
        orthogonal = guidance - parallel
        return (self.scale - 1) * (parallel * self.eta + orthogonal)

    def enabled(self) -> bool:
        return self.scale != 1.0


@dataclass(frozen=True)
class MultiModalGuider:
    """Guided x0 for one modality from up to four predictions (computed in float32):

        pred = cond + (cfg - 1)(cond - uncond_text) + stg (cond - uncond_perturbed)
                    + (modality - 1)(cond - uncond_modality)
        pred *= rescale * std(cond) / std(pred) + (1 - rescale)        if rescale != 0
    (std over the whole tensor, unbiased). Predictions a setting does not need may be passed as 0.
    """

    params: MultiModalGuiderParams = field(default_factory=MultiModalGuiderParams)

    def calculate(
        self,
        cond: torch.Tensor,
        uncond_text: torch.Tensor | float = 0.0,
        uncond_perturbed: torch.Tensor | float = 0.0,
        uncond_modality: torch.Tensor | float = 0.0,
    ) -> torch.Tensor:
        p = self.params
        dtype = cond.dtype
        cond = cond.float()

        def f32(x: torch.Tensor | float) -> torch.Tensor | float:
            return x.float() if isinstance(x, torch.Tensor) else x

        pred = (
            cond
            + (p.cfg_scale - 1) * (cond - f32(uncond_text))
            + p.stg_scale * (cond - f32(uncond_perturbed))
            + (p.modality_scale - 1) * (cond - f32(uncond_modality))
        )
        if p.rescale_scale != 0:
            factor = cond.std() / pred.std()
            pred = pred * (p.rescale_scale * factor + (1 - p.rescale_scale))
        return pred.to(dtype)


@dataclass(frozen=True)
class GuiderSchedule:
    """Guider params that change with sigma: bins keyed by their upper sigma bound.

    Bin with key k_i covers (k_{i+1}, k_i] for keys sorted high to low; a sigma above every key uses
    the highest bin.
    """

    bins: tuple[tuple[float, MultiModalGuiderParams], ...]

    def __post_init__(self) -> None:
        if not self.bins:
            raise ValueError("a guider schedule needs at least one (sigma, params) bin")
        object.__setattr__(self, "bins", tuple(sorted(self.bins, key=lambda kv: kv[0], reverse=True)))

    @classmethod
    def constant(cls, params: MultiModalGuiderParams) -> GuiderSchedule:
        return cls(((math.inf, params),))

    @classmethod
    def from_mapping(cls, by_sigma: Mapping[float, MultiModalGuiderParams]) -> GuiderSchedule:
        return cls(tuple(by_sigma.items()))

    def params_at(self, sigma: float | torch.Tensor) -> MultiModalGuiderParams:
        value = float(sigma)
        covering = [params for key, params in self.bins if key >= value]
        return covering[-1] if covering else self.bins[0][1]


def as_schedule(params: MultiModalGuiderParams | GuiderSchedule | None) -> GuiderSchedule:
    """None -> no guidance (cond only)."""
    if params is None:
        return GuiderSchedule.constant(MultiModalGuiderParams())
    if isinstance(params, GuiderSchedule):
        return params
    if isinstance(params, MultiModalGuiderParams):
        return GuiderSchedule.constant(params)
    raise ValueError(f"guider params must be MultiModalGuiderParams or GuiderSchedule, got {type(params).__name__}")


def guider_params_from_dict(values: Mapping[str, float | int | Sequence[int]]) -> MultiModalGuiderParams:
    """Params from a plain dict (CLI / JSON); unknown keys raise naming the accepted ones."""
    accepted = set(MultiModalGuiderParams.__dataclass_fields__)
    unknown = set(values) - accepted
    if unknown:
        raise ValueError(f"unknown guider params {sorted(unknown)}; accepted: {sorted(accepted)}")
    return MultiModalGuiderParams(**values)  # type: ignore[arg-type]
