"""Which sampling loop a denoising stage runs: plain Euler (the default), or Euler ancestral - a
deterministic Euler step to `sigma_down` and fresh noise back up to the next sigma (rectified-flow form,
`ltx_core.components.EulerAncestralStep`).

The ancestral re-noise has its own stream: with a seeded run it is a second generator seeded
`seed + ANCESTRAL_NOISE_SEED_OFFSET` (the reference's rule: a generator seeded like the stage's initial
noise would repeat those very draws), drawn video then audio per step and named
`<stage>.ancestral.<step>.<video|audio>`, so a recorded run is replayed through the same names.

LTX-2.5 (`model_version` >= 2.5) samples the distilled pipeline's stage 1 this way (eta 1, s_noise 1);
every stage takes it as an option (`run_denoising_stage(sampler=...)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ltx_core.components import EulerAncestralStep, euler_ancestral_denoising_loop
from ltx_pipelines.engine.noise_sources import NoiseSource, offset_stream

ANCESTRAL_SAMPLER_SINCE_VERSION = (2, 5)
ANCESTRAL_NOISE_SEED_OFFSET = 10000


@dataclass(frozen=True)
class AncestralSampler:
    """Euler ancestral with `eta` (0: plain Euler, 1: fully ancestral) and `s_noise` (re-noise scale); its
    draws come from the run's noise source offset by `noise_seed_offset`."""

    eta: float = 1.0
    s_noise: float = 1.0
    noise_seed_offset: int = ANCESTRAL_NOISE_SEED_OFFSET

    def __post_init__(self) -> None:
        if not 0.0 <= self.eta <= 1.0:
            raise ValueError(f"ancestral eta must be in [0, 1], got {self.eta}")
        if self.s_noise < 0:
            raise ValueError(f"ancestral s_noise must be >= 0, got {self.s_noise}")

    def loop(self, noise: NoiseSource, stage: str):  # -> SamplingLoop (engine.stage_blocks)
        """The stage's sampling loop, drawing from its own stream of `noise` (one per stage call)."""
        return partial(
            euler_ancestral_denoising_loop,
            step=EulerAncestralStep(eta=self.eta, s_noise=self.s_noise),
            noise=offset_stream(noise, self.noise_seed_offset),
            noise_name_prefix=f"{stage}.",
        )


def distilled_stage_1_sampler(model_version: tuple[int, ...]) -> AncestralSampler | None:
    """The distilled pipeline's stage-1 sampler for a model version: ancestral from LTX-2.5 on,
    plain Euler (None) before."""
    return AncestralSampler() if model_version >= ANCESTRAL_SAMPLER_SINCE_VERSION else None
