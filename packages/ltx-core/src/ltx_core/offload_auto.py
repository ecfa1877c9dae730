"""`--offload auto`: for the transformer and for the text encoder each, the fastest loading mode that fits.

The two models never share memory (the text encoder is freed before the transformer is built), so each is
chosen on its own phases: the prompt enhancer and the text encoder for Gemma; the denoising stages and the
upsampler (during which the transformer stays loaded) for the transformer. Modes are tried fastest first:
full load, fp8 weights, block streaming from host RAM, block streaming from disk. A mode fits when its phases
fit the usable device memory (free memory less `headroom`) and what it keeps in host RAM fits the host's.
Where the models run in host RAM (CPU, MPS) there is one budget, and streaming from RAM saves nothing, so it
is not tried. The phases no mode changes (text embeddings, image encoder, decode) must fit as they are.

`choose_offload` is a pure function of the sizes, the workload and the free memory given to it; the caller
reads the free memory (`ltx_core.devices.available_memory`) and logs `OffloadChoice.log_lines()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ltx_core.generation_memory import (
    TEXT_ENCODER_MODES,
    TRANSFORMER_MODES,
    GenerationEstimate,
    GenerationSizes,
    GenerationWorkload,
    Phase,
    estimate_generation,
)
from ltx_core.memory_estimate import InsufficientMemoryError
from ltx_core.runtime import RuntimeOptions

TRANSFORMER_PHASES = ("stage 1", "upsampler", "stage 2", "denoising")
TEXT_ENCODER_PHASES = ("prompt enhancer", "text encoder")
_GIB = 2**30


def _gib(n: int) -> str:
    return f"{n / _GIB:.1f} GiB" if n >= _GIB else f"{n / 2**20:.0f} MiB"


@dataclass(frozen=True)
class ModeChoice:
    """One model's pick: its `mode` (None: none fits) and one line saying why, with the numbers."""

    model: str
    mode: str | None
    reason: str


@dataclass(frozen=True)
class OffloadChoice:
    transformer: ModeChoice
    text_encoder: ModeChoice
    other: ModeChoice | None
    """The phases no mode changes, when one of them does not fit (None: they fit)."""
    estimate: GenerationEstimate
    """The run's phases under the chosen modes (the slowest modes where nothing fits)."""

    @property
    def fits(self) -> bool:
        return self.transformer.mode is not None and self.text_encoder.mode is not None and self.other is None

    def log_lines(self) -> list[str]:
        choices = (self.transformer, self.text_encoder, self.other)
        return [f"--offload auto: {c.model}: {c.reason}" for c in choices if c is not None]

    def failure(self, free_bytes: int, *, in_host_ram: bool, headroom: float = 0.1) -> str:
        """The error of a run no mode fits: the estimate under the leanest modes and each model's reason."""
        memory = "RAM is available" if in_host_ram else "device memory is free"
        reasons = "; ".join(c.reason for c in (self.transformer, self.text_encoder, self.other) if c and not c.mode)
        return (
            f"this run needs about {self.estimate.describe(host=in_host_ram)} with --offload auto, but only "
            f"{_gib(free_bytes)} of {memory} (keeping {headroom:.0%} in reserve): {reasons}; lower the resolution "
            "or frame count, or tile the VAE decode"
        )

    def cell(self) -> str:
        """The README table's cell: 'transformer mode / text-encoder mode', or 'no'."""
        return f"{self.transformer.mode} / {self.text_encoder.mode}" if self.fits else "no"


def _need(phases: Sequence[Phase], in_host_ram: bool) -> tuple[int, int, str]:
    """(device bytes, host bytes, name of the largest phase) of `phases` (host RAM runs: one sum)."""
    if in_host_ram:
        worst = max(phases, key=lambda p: p.device + p.host)
        return worst.device + worst.host, 0, worst.name
    worst = max(phases, key=lambda p: p.device)
    return worst.device, max(p.host for p in phases), worst.name


def _pick(
    model: str,
    modes: Sequence[str],
    phases_of: dict[str, list[Phase]],
    budget: int,
    host_budget: int | None,
    in_host_ram: bool,
) -> ModeChoice:
    memory = "RAM" if in_host_ram else "device memory"
    tried = []
    for mode in modes:
        device, host, phase = _need(phases_of[mode], in_host_ram)
        if device > budget:
            tried.append(f"{mode} needs {_gib(device)} in {phase}")
            continue
        if host_budget is not None and host > host_budget:
            tried.append(f"{mode} needs {_gib(host)} of host RAM, {_gib(host_budget)} usable")
            continue
        faster = f"; {', '.join(tried)}" if tried else ""
        return ModeChoice(
            model, mode, f"{mode}: needs {_gib(device)} in {phase}, {_gib(budget)} of {memory} usable{faster}"
        )
    return ModeChoice(model, None, f"no mode fits {_gib(budget)} of {memory}: {', '.join(tried)}")


def choose_offload(
    sizes: GenerationSizes,
    work: GenerationWorkload,
    *,
    free_bytes: int,
    free_host_bytes: int | None = None,
    in_host_ram: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    headroom: float = 0.1,
    transformer_modes: Sequence[str] = TRANSFORMER_MODES,
    text_encoder_modes: Sequence[str] = TEXT_ENCODER_MODES,
) -> OffloadChoice:
    """The fastest transformer mode and text-encoder mode that fit `free_bytes` of device memory (in host RAM
    runs: of RAM) and `free_host_bytes` of host RAM (None: not checked), keeping `headroom` in reserve."""
    budget = int(free_bytes * (1 - headroom))
    host_budget = None if in_host_ram or free_host_bytes is None else int(free_host_bytes * (1 - headroom))
    if in_host_ram:  # the blocks would stay in the same memory: streaming from RAM saves nothing
        transformer_modes = [m for m in transformer_modes if m != "stream-ram"]
        text_encoder_modes = [m for m in text_encoder_modes if m != "stream-ram"]

    def estimate(transformer: str, text: str) -> GenerationEstimate:
        return estimate_generation(sizes, work, transformer_mode=transformer, text_encoder_mode=text, dtype=dtype)

    def phases(e: GenerationEstimate, names: Sequence[str]) -> list[Phase]:
        return [p for p in e.phases if p.name in names]

    by_transformer = {m: phases(estimate(m, text_encoder_modes[-1]), TRANSFORMER_PHASES) for m in transformer_modes}
    by_text = {m: phases(estimate(transformer_modes[-1], m), TEXT_ENCODER_PHASES) for m in text_encoder_modes}
    transformer = _pick("transformer", transformer_modes, by_transformer, budget, host_budget, in_host_ram)
    text_encoder = _pick("text encoder", text_encoder_modes, by_text, budget, host_budget, in_host_ram)
    chosen = estimate(transformer.mode or transformer_modes[-1], text_encoder.mode or text_encoder_modes[-1])
    fixed = [p for p in chosen.phases if p.name not in (*TRANSFORMER_PHASES, *TEXT_ENCODER_PHASES)]
    other = None
    if fixed:
        device, host, phase = _need(fixed, in_host_ram)
        if device > budget:
            other = ModeChoice("other phases", None, f"{phase} needs {_gib(device)}, {_gib(budget)} usable")
        elif host_budget is not None and host > host_budget:
            other = ModeChoice(
                "other phases", None, f"{phase} needs {_gib(host)} of host RAM, {_gib(host_budget)} usable"
            )
    return OffloadChoice(transformer=transformer, text_encoder=text_encoder, other=other, estimate=chosen)


def transformer_mode_of(options: RuntimeOptions) -> str:
    """The `TRANSFORMER_MODES` name of explicit flags (a streamed fp8 transformer counts as streamed)."""
    if options.offload == "cpu":
        return "stream-ram"
    if options.offload == "disk":
        return "stream-disk"
    return "fp8" if options.quantization else "full"


def check_generation_fits(
    sizes: GenerationSizes,
    work: GenerationWorkload,
    *,
    transformer_options: RuntimeOptions,
    text_encoder_mode: str,
    free_bytes: int,
    free_host_bytes: int | None = None,
    in_host_ram: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    headroom: float = 0.1,
) -> GenerationEstimate:
    """The estimate of a run with explicit flags, or an `InsufficientMemoryError` naming its phases and what
    `--offload auto` would pick instead (or that nothing fits)."""
    estimate = estimate_generation(
        sizes, work, transformer_mode=transformer_mode_of(transformer_options), text_encoder_mode=text_encoder_mode,
        dtype=dtype, transformer_options=transformer_options,
    )  # fmt: skip
    budget = int(free_bytes * (1 - headroom))
    need = estimate.host_peak if in_host_ram else estimate.peak
    host_short = (
        not in_host_ram and free_host_bytes is not None and estimate.host_ram > free_host_bytes * (1 - headroom)
    )
    if need <= budget and not host_short:
        return estimate
    choice = choose_offload(
        sizes, work, free_bytes=free_bytes, free_host_bytes=free_host_bytes, in_host_ram=in_host_ram, dtype=dtype,
        headroom=headroom,
    )  # fmt: skip
    advice = (
        f"--offload auto would pick transformer {choice.transformer.mode}, text encoder {choice.text_encoder.mode}"
        if choice.fits
        else "no loading mode fits: lower the resolution or frame count, or tile the VAE decode"
    )
    memory = "RAM is available" if in_host_ram else "device memory is free"
    if host_short:
        raise InsufficientMemoryError(
            f"this run holds about {_gib(estimate.host_ram)} in host RAM (streamed weights, the decoded clip), but "
            f"only {_gib(free_host_bytes or 0)} is available (keeping {headroom:.0%} in reserve); {advice}"
        )
    raise InsufficientMemoryError(
        f"this run needs about {estimate.describe(host=in_host_ram)}, but only {_gib(free_bytes)} of {memory} "
        f"(keeping {headroom:.0%} in reserve); {advice}"
    )
