"""`torch.compile` applied per transformer block, with a dynamic sequence dimension.

Compiling block by block keeps each graph small (every block has the same code, so one compiled
graph serves all of them up to the guard cache), leaves the pre/post-processing eager, and works
with block streaming, whose hooks swap the weights in eagerly around each compiled forward.
The compiled callable replaces the block's `forward` only, so parameter names (and checkpoint keys)
do not change.

`CompileConfig.from_key_values(["mode=max-autotune", "backend=inductor", "fullgraph=true",
"inductor.coordinate_descent_tuning=true", "dynamo.cache_size_limit=512"])` parses the CLI form
(`--compile KEY=VALUE ...`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

logger = logging.getLogger(__name__)

# (The reference also sets inline_inbuilt_nn_modules=True, which current torch always does.)
_DEFAULT_DYNAMO: dict[str, Any] = {"cache_size_limit": 256}
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class CompileConfig:
    """How to compile each transformer block (the arguments of `torch.compile`, plus where it applies)."""

    mode: str | None = None
    backend: str = "inductor"
    fullgraph: bool = False
    dynamic: bool | None = None
    inductor_config: Mapping[str, Any] = field(default_factory=dict)
    dynamo_config: Mapping[str, Any] = field(default_factory=lambda: dict(_DEFAULT_DYNAMO))
    seq_dim_dynamic: bool = True  # mark the token axis dynamic: one graph for every resolution / length

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"compile mode {self.mode!r} is not one of {[m for m in _MODES if m]}")
        known = torch._dynamo.list_backends(exclude_tags=())
        if self.backend not in known and self.backend != "inductor":
            raise ValueError(f"compile backend {self.backend!r} is unknown; available: {known}")

        if self.mode is not None and self.inductor_config:
            raise ValueError("torch.compile takes either a mode or inductor options, not both; drop one of them")

    @property
    def uses_cuda_graphs(self) -> bool:
        return self.mode in _CUDA_GRAPH_MODES

    @classmethod
    def from_key_values(cls, items: Sequence[str]) -> CompileConfig:
        """Parse `KEY=VALUE` items; `inductor.X=V` / `dynamo.X=V` set one option of those configs.

        Values are JSON when they parse as JSON (true, 3, null, "x"), else plain strings.
        """
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        inductor: dict[str, Any] = {}
        dynamo: dict[str, Any] = dict(_DEFAULT_DYNAMO)
        for item in items:
            key, sep, raw = item.partition("=")
            if not sep or not key:
                raise ValueError(f"--compile item {item!r} is not KEY=VALUE")
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            if key.startswith("inductor."):
                inductor[key.removeprefix("inductor.")] = value
            elif key.startswith("dynamo."):
                dynamo[key.removeprefix("dynamo.")] = value
            elif key in names and key not in ("inductor_config", "dynamo_config"):
                values[key] = value
            else:
                plain = sorted(names - {"inductor_config", "dynamo_config"})
                accepted = [*plain, "inductor.<option>", "dynamo.<option>"]
                raise ValueError(f"unknown --compile key {key!r}; accepted: {', '.join(accepted)}")
        return cls(**values, inductor_config=inductor, dynamo_config=dynamo)

    def validate(self, device: torch.device, *, streaming: bool) -> None:
        if self.uses_cuda_graphs and streaming:
            raise ValueError(
                f"compile mode {self.mode!r} records CUDA graphs, which need the weights to stay on the GPU; "
                "it cannot run with --offload cpu/disk. Use mode=default or max-autotune-no-cudagraphs"
            )
        if self.uses_cuda_graphs and device.type != "cuda":
            raise ValueError(
                f"compile mode {self.mode!r} records CUDA graphs; this run uses {device}. Use mode=default"
            )


def _mark_token_axis_dynamic(_module: nn.Module, args: tuple[Any, ...]) -> None:
    """Forward pre-hook (eager): mark the token axis of every (B, T, ...) tensor in the block's inputs."""
    for state in args[:2]:
        if state is None:
            continue
        for name in ("x", "timestep_mod", "embedded_timestep", "cross_mod"):
            t = getattr(state, name, None)
            if isinstance(t, torch.Tensor) and t.ndim >= 2 and t.shape[1] > 1:
                torch._dynamo.maybe_mark_dynamic(t, 1)


def compile_blocks(blocks: Sequence[nn.Module], config: CompileConfig) -> None:
    """Compile each block's forward in place (parameter names unchanged)."""
    for option, value in config.dynamo_config.items():
        setattr(torch._dynamo.config, option, value)  # dynamo options are process-wide by design
    options = dict(config.inductor_config) if config.backend == "inductor" and config.inductor_config else None
    for block in blocks:
        if getattr(block, "_ltx_compiled", False):
            continue
        block.forward = torch.compile(
            block.forward, mode=config.mode, backend=config.backend, fullgraph=config.fullgraph,
            dynamic=config.dynamic, options=options,
        )  # fmt: skip
        if config.seq_dim_dynamic:
            block._ltx_dynamic_hook = block.register_forward_pre_hook(_mark_token_axis_dynamic)
        block._ltx_compiled = True
    logger.info("compiled %d transformer blocks (%s, mode %s)", len(blocks), config.backend, config.mode)


def uncompile_blocks(blocks: Sequence[nn.Module]) -> None:
    for block in blocks:
        if getattr(block, "_ltx_compiled", False):
            del block.forward
            hook = getattr(block, "_ltx_dynamic_hook", None)
            if hook is not None:
                hook.remove()
            block._ltx_compiled = False
