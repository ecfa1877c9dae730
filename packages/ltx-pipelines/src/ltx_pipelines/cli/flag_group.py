"""What a flag group is: it adds its flags to the parser, turns the parsed values into one frozen, typed
value (checking them), and says what the sidecar records of that value.

A pipeline's command line is the list of groups it uses (`cli.command.PipelineCommand`). Groups are read in
order, so a group may use the values of the groups before it (the tiling flags need the output size). The
argv is parsed once: flags whose default depends on the checkpoint's model generation (or on `--demo`)
parse to None and the group fills in the default when it reads them.
"""

from __future__ import annotations

import argparse
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ltx_pipelines.engine.defaults import PipelineDefaults

if TYPE_CHECKING:
    from ltx_pipelines.cli.model_flags import RunModels

V = TypeVar("V")
G = TypeVar("G")


class FlagError(ValueError):
    """A flag value that is not accepted; the message names the flag, the value and what is accepted. The
    command line turns it into an argparse error (exit code 2) before any model loads."""


def finite(flag: str, value: float) -> float:
    if not math.isfinite(value):
        raise FlagError(f"{flag} {value} is not a finite number")
    return float(value)


@dataclass(frozen=True)
class ReadContext:
    """What a group may use while reading: the defaults of the run (the checkpoint generation's, the demo's)
    and the values of the groups read before it."""

    defaults: PipelineDefaults
    demo: bool
    values: Mapping[type, Any] = field(default_factory=dict)

    def value(self, group: type[FlagGroup[G]]) -> G:
        """The value of an earlier group of this command line (KeyError: the command has no such group)."""
        return self.values[group]


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
