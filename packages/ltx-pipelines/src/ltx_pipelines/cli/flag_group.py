"""What a flag group is: it adds its flags to the parser, turns the parsed values into one frozen, typed
value (checking them), and says what the sidecar records of that value, what it adds to the pipeline's
constructor and prompt call, and what the memory check plans for.

A pipeline's command line is the list of groups it uses (`cli.command.PipelineCommand`). Groups are read in
order, so a group may use the values of the groups before it (the tiling flags need the output size). The
argv is parsed once: flags whose default depends on the checkpoint's model version (or on `--demo`)
parse to None and the group fills in the default when it reads them.
"""

from __future__ import annotations

import argparse
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ltx_pipelines.engine.model_versions import PipelineDefaults

if TYPE_CHECKING:
    from ltx_core.model.video_vae.tiling_config import TilingConfig
    from ltx_pipelines.cli.model_resolution import RunModels

V = TypeVar("V")
G = TypeVar("G")


class FlagError(ValueError):
    """A flag value that is not accepted; the message names the flag, the value and what is accepted. The
    command line turns it into an argparse error (exit code 2) before any model loads."""


def finite(flag: str, value: float) -> float:
    if not math.isfinite(value):
        raise FlagError(f"{flag} {value} is not a finite number")
    return float(value)


def add_run_default(
    group: Any, flag: str, kind: Callable[[str], Any], text: str, shown: object, **options: Any
) -> None:
    """Add a flag whose default is the run's (the checkpoint's model version's, or the demo's): it parses to None,
    the group fills the default in when it reads it, and `--help` says `<text> (default: <shown>).`."""
    group.add_argument(flag, type=kind, default=None, help=f"{text} (default: {shown}).", **options)


def fields_of(value: Any, *names: str) -> dict[str, Any]:
    """The named fields of a group's value, by name: what a group records or contributes under its fields' own
    names."""
    return {name: getattr(value, name) for name in names}


@dataclass(frozen=True)
class ReadContext:
    """What a group may use while reading: the defaults of the run (the model version's, the demo's)
    and the values of the groups read before it."""

    defaults: PipelineDefaults
    demo: bool
    values: Mapping[type, Any] = field(default_factory=dict)

    def value(self, group: type[FlagGroup[G]]) -> G:
        """The value of an earlier group of this command line (KeyError: the command has no such group)."""
        return self.values[group]


@dataclass(frozen=True)
class MemoryInputs:
    """What the memory check plans for, as a command's groups contribute it (`FlagGroup.memory_inputs`): the
    output (no `num_frames`: nothing to estimate), its decode tiling, the guidance batch, the prompts Gemma
    encodes at once (2 with a negative prompt), prompt enhancement and whether images are encoded."""

    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    frame_rate: float | None = None
    images: bool = False
    tiling: TilingConfig | None = None
    batch: int = 1
    prompts: int = 1
    enhance: bool = False


class FlagGroup(ABC, Generic[V]):
    """One group of flags and the value it makes of them."""

    @abstractmethod
    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        """Add the group's flags (`defaults`: the values `--help` shows for generation-dependent flags)."""

    @abstractmethod
    def read(self, args: argparse.Namespace, context: ReadContext) -> V:
        """The checked value of the flags as typed (raises `FlagError`); cheap: no download, no model."""

    def settle(self, value: V, models: RunModels, context: ReadContext) -> V:
        """The value once the model files are known (e.g. STG blocks fitted to the transformer's depth)."""
        return value

    def record(self, value: V) -> dict[str, Any]:
        """The sidecar `parameters` entries of this group, by flag destination."""
        return {}

    def pipeline_options(self, value: V) -> dict[str, Any]:
        """Constructor options every pipeline takes that this group sets (e.g. `parallel` over several devices)."""
        return {}

    def call_arguments(self, value: V) -> dict[str, Any]:
        """The keyword arguments of the pipeline's prompt call that this group sets; a command's call is the
        prompt and the union of its groups' arguments (`Run.call_arguments`)."""
        return {}

    def memory_inputs(self, value: V) -> dict[str, Any]:
        """The `MemoryInputs` fields this group sets (what the memory check plans for)."""
        return {}


# The loops over a command's groups live beside the defaults they mostly call: a group that keeps a default
# is answered here, without a round trip through the command.


def settle_groups(
    groups: Sequence[FlagGroup[Any]], values: dict[type, Any], models: RunModels, context: ReadContext
) -> None:
    """Each group's value in `values` replaced by its settled one (`FlagGroup.settle`), in the command's order:
    a group settles with the settled values of the groups before it (`context` reads `values`)."""
    for group in groups:
        values[type(group)] = group.settle(values[type(group)], models, context)


def union_of(groups: Sequence[FlagGroup[Any]], values: Mapping[type, Any], method: str) -> dict[str, Any]:
    """The union of what the groups contribute through `method` (`pipeline_options`, `call_arguments`,
    `memory_inputs`); two groups setting one name is an error in the command's definition."""
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for group in groups:
        for name, value in getattr(group, method)(values[type(group)]).items():
            if name in merged:
                raise ValueError(f"{method} {name!r} is set by both {owner[name]} and {type(group).__name__}")
            merged[name], owner[name] = value, type(group).__name__
    return merged
