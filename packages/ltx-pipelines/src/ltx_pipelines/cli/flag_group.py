"""What a flag group is: its flags (as data, `sections`), and one `read` that turns the parsed values into a
frozen, typed value (checking them) together with everything the command takes of that value: what the sidecar
records, what it adds to the pipeline's constructor and prompt call, and what the memory check plans for (a
`Reading`). The command makes one `read` per group, and one `settle` for a group whose reading says its value
still depends on the model files.

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


@dataclass(frozen=True)
class Flag:
    """One flag as data: `add_argument(name, **options)`. `shown` marks a flag whose default is the run's (the
    checkpoint's model version's, or the demo's): it parses to None, the group fills the default in when it reads
    it, and `--help` ends its text with ` (default: <shown>).`, `shown` formatted over the run's `PipelineDefaults`
    fields (e.g. `{seed}`, `{frame_rate:g}`)."""

    name: str
    options: Mapping[str, Any]
    shown: str | None = None


@dataclass(frozen=True)
class FlagSection:
    """A titled group of flags, as `--help` shows it."""

    title: str
    flags: tuple[Flag, ...]


def add_groups(parser: Any, groups: Sequence[FlagGroup[Any]], defaults: PipelineDefaults) -> None:
    """Each group's flags, in the command's order: its `sections` (the run-default flags' help showing
    `defaults`), then what its `add` adds."""
    for group in groups:
        add_sections(parser, group.sections, defaults)
        group.add(parser, defaults)


def add_sections(parser: Any, sections: tuple[FlagSection, ...], defaults: PipelineDefaults) -> None:
    """`sections` added to `parser` (an `argparse.ArgumentParser`), the run-default flags' help showing `defaults`."""
    shown = vars(defaults)
    for section in sections:
        group = parser.add_argument_group(section.title)
        for flag in section.flags:
            options = dict(flag.options)
            if flag.shown is not None:
                options.update(default=None, help=f"{options['help']} (default: {flag.shown.format_map(shown)}).")
            group.add_argument(flag.name, **options)


def fields_of(value: Any, *names: str) -> dict[str, Any]:
    """The named fields of a group's value, by name: what a group records or contributes under its fields' own
    names."""
    return {name: getattr(value, name) for name in names}


@dataclass(frozen=True)
class ReadContext:
    """What a group may use while reading: the defaults of the run (the model version's, the demo's)
    and the values of the groups read before it (`values[VideoFlags]`; KeyError: the command has no such group)."""

    defaults: PipelineDefaults
    demo: bool
    values: Mapping[type, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryInputs:
    """What the memory check plans for, as a command's groups contribute it (`Reading.memory_inputs`): the
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


@dataclass(frozen=True)
class Reading(Generic[V]):
    """A group's checked value and everything the command takes of it, worked out at once by the group."""

    value: V
    record: Mapping[str, Any] = field(default_factory=dict)
    """The sidecar `parameters` entries of this group, by flag destination."""
    pipeline_options: Mapping[str, Any] = field(default_factory=dict)
    """Constructor options every pipeline takes that this group sets (e.g. `parallel` over several devices)."""
    call_arguments: Mapping[str, Any] = field(default_factory=dict)
    """The keyword arguments of the pipeline's prompt call that this group sets; a command's call is the prompt
    and the union of its groups' arguments (`Run.call_arguments`)."""
    memory_inputs: Mapping[str, Any] = field(default_factory=dict)
    """The `MemoryInputs` fields this group sets (what the memory check plans for)."""
    settle: bool = False
    """Whether the value still depends on the model files: the command then calls `FlagGroup.settle` once they
    are known."""


class FlagGroup(ABC, Generic[V]):
    """One group of flags and the value it makes of them."""

    sections: tuple[FlagSection, ...] = ()
    """The group's flags, as data (`add_sections` adds them)."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        """Flags that `sections` cannot say, added after them (`defaults`: the values `--help` shows for
        generation-dependent flags)."""

    @abstractmethod
    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[V]:
        """The checked value of the flags as typed (raises `FlagError`) and what the command takes of it; cheap:
        no download, no model."""

    def settle(self, value: V, models: RunModels, context: ReadContext) -> Reading[V]:
        """The reading of the value once the model files are known (e.g. STG blocks fitted to the transformer's
        depth); called only where `read` asked for it (`Reading.settle`)."""
        raise NotImplementedError(f"{type(self).__name__} asks to settle its value but does not say how")
