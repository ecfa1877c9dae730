"""Learning-rate schedules, advanced exactly once per optimizer step.

The reference lets accelerate wrap its scheduler, which under DDP (split_batches=False) advances it once
per process per step, so with N processes its schedule ends after steps/N steps. We never hand the
scheduler to accelerate: the loop calls `step()` once per optimizer step whatever the process count.

Defaults per type (overridden by `optimization.scheduler_params`): linear 1 -> 0.1 over `steps`; cosine
to eta_min 0 over `steps`; cosine_with_restarts T_0 = steps // 4, T_mult 1, eta_min 5e-5; polynomial power 1
over `steps`; step step_size = steps // 2, gamma 0.1; constant leaves the rate alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch.optim import Optimizer
from torch.optim import lr_scheduler as sched


def _defaults(kind: str, steps: int) -> dict[str, Any]:
    return {
        "constant": {},
        "linear": {"start_factor": 1.0, "end_factor": 0.1, "total_iters": steps},
        "cosine": {"T_max": steps, "eta_min": 0.0},
        "cosine_with_restarts": {"T_0": max(steps // 4, 1), "T_mult": 1, "eta_min": 5e-5},
        "polynomial": {"total_iters": steps, "power": 1.0},
        "step": {"step_size": max(steps // 2, 1), "gamma": 0.1},
    }[kind]


_CLASSES = {
    "constant": None,
    "linear": sched.LinearLR,
    "cosine": sched.CosineAnnealingLR,
    "cosine_with_restarts": sched.CosineAnnealingWarmRestarts,
    "polynomial": sched.PolynomialLR,
    "step": sched.StepLR,
}


def make_lr_scheduler(
    optimizer: Optimizer, kind: str, steps: int, params: Mapping[str, Any] | None = None
) -> sched.LRScheduler:
    if kind not in _CLASSES:
        raise ValueError(f"optimization.scheduler_type {kind!r} (accepted: {sorted(_CLASSES)})")
    kwargs = {**_defaults(kind, steps), **dict(params or {})}
    cls = _CLASSES[kind]
    if cls is None:
        if kwargs:
            raise ValueError(f"optimization.scheduler_params {sorted(kwargs)}: the constant schedule takes none")
        return sched.LambdaLR(optimizer, lambda _: 1.0)
    allowed = set(_defaults(kind, steps))
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(
            f"optimization.scheduler_params {sorted(unknown)} are not parameters of {kind!r} "
            f"(accepted: {sorted(allowed)})"
        )
    return cls(optimizer, **kwargs)
