"""Guidance helpers: per-item attention perturbations (STG, modality isolation)."""

from ltx_core.guidance.perturbations import (
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)

__all__ = ["BatchedPerturbationConfig", "Perturbation", "PerturbationConfig", "PerturbationType"]
