"""Where a pipeline's random draws come from: a seeded generator, or tensors replayed from a file.

Every draw is named (`stage_1.video`, `stage_1.audio`, `stage_2.video`, ..., `decoder.<i>`, and
the res2s sampler's `stage_<k>.res2s.<i>.<substep|step>.<video|audio>`) and made in a fixed order,
so a run can be reproduced exactly from its seed, or replayed from stored noise (the golden
fixtures) through the very same pipeline code. `NoiseSource` is the core protocol, so core
samplers take these sources too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ltx_core.components.noisers import NoiseSource

__all__ = ["NoiseSource", "ReplayedNoise", "SeededNoise"]


@dataclass
class SeededNoise:
    """Draws from one CPU `torch.Generator`, so a seed gives the same noise on every device."""

    seed: int
    drawn: list[str] = field(default_factory=list)
    _generator: torch.Generator | None = field(default=None, repr=False)

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if self._generator is None:
            self._generator = torch.Generator(device="cpu").manual_seed(self.seed)
        self.drawn.append(name)
        noise = torch.randn(tuple(shape), generator=self._generator, dtype=torch.float32)
        return noise.to(device=device, dtype=dtype)

    def generator_state(self) -> torch.Tensor | None:
        """Where the draws stand (a copy of the generator's state), or None before the first draw."""
        return None if self._generator is None else self._generator.get_state().clone()

    @classmethod
    def resumed(cls, seed: int, state: torch.Tensor | None) -> SeededNoise:
        """A source whose next draw is the one that followed `state` (None: the seed's first draw)."""
        source = cls(seed)
        if state is not None:
            source._generator = torch.Generator(device="cpu")
            source._generator.set_state(state.clone())
        return source

    def fork(self) -> SeededNoise:
        """An independent copy at the same point: its draws are the ones this source would make next."""
        return SeededNoise.resumed(self.seed, self.generator_state())


def offset_stream(noise: NoiseSource, offset: int) -> NoiseSource:
    """A second, independent stream of a run's noise: a seeded source gives a fresh generator seeded
    `seed + offset` (e.g. the ancestral sampler's re-noise); a replay serves those draws by their names
    from the same stored tensors, so it is returned as it is."""
    if isinstance(noise, SeededNoise):
        return SeededNoise(noise.seed + offset)
    return noise


def fork_noise(noise: NoiseSource) -> NoiseSource:
    """A copy of `noise` at its current point (sources that keep no position are returned as they are),
    so the same draws can be made again, e.g. to decode a video twice."""
    fork = getattr(noise, "fork", None)
    return fork() if callable(fork) else noise


@dataclass(frozen=True)
class ReplayedNoise:
    """Returns stored tensors by name (e.g. `t2v.noise.stage_1.video` with prefix `t2v.noise.`).

    `drawn` records every name served, in order, so a replay can check that each stored draw was
    consumed exactly once (`unused()`, `repeated()`).
    """

    tensors: Mapping[str, torch.Tensor]
    prefix: str = ""
    drawn: list[str] = field(default_factory=list, compare=False)

    @property
    def stored(self) -> list[str]:
        """Names (without the prefix) of the stored draws, in storage order."""
        return [k[len(self.prefix) :] for k in self.tensors if k.startswith(self.prefix)]

    def unused(self) -> list[str]:
        return [name for name in self.stored if name not in self.drawn]

    def repeated(self) -> list[str]:
        return sorted({name for name in self.drawn if self.drawn.count(name) > 1})

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        key = self.prefix + name
        if key not in self.tensors:
            raise KeyError(f"no stored noise named {key!r}")
        noise = self.tensors[key]
        if tuple(noise.shape) != tuple(shape):
            raise ValueError(f"stored noise {key!r} has shape {tuple(noise.shape)}, the pipeline needs {tuple(shape)}")
        self.drawn.append(name)
        return noise.to(device=device, dtype=dtype)
