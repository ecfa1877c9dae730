"""Which pipelines a server runs (`--pipelines`), what a request may ask of each, and which of the server's
pipeline flags go to each one.

A served pipeline is a `python -m ltx_pipelines.<name>` command: the worker runs its `COMMAND` (flags read by
its own flag groups, its own build and generate), so what a request may ask (a negative prompt, the size
multiple) is read off that command rather than kept in a second table here.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The prompt-to-video commands a request can name: the distilled one and the guided family.
SERVABLE = ("distilled", "ti2vid_one_stage", "ti2vid_two_stages", "ti2vid_two_stages_hq")
DEFAULT_PIPELINES = ("distilled",)

# What every job adds to the server's pipeline flags (the warm-up job's values): enough for a parser whose
# --prompt and --output-path are required to read the model flags.
_PLACEHOLDER_JOB = ("--prompt", "x", "--output-path", "x.mp4")


@dataclass(frozen=True)
class ServedPipeline:
    """What the API checks of a request for one pipeline."""

    name: str
    guided: bool
    """Takes a negative prompt (the guided family); the distilled pipeline runs without guidance."""
    spatial_multiple: int
    """Height and width must be multiples of this (64 where stage 1 runs at half size)."""


def command_of(name: str) -> Any:
    """The `PipelineCommand` of `ltx_pipelines.<name>` (ValueError for a name this server cannot run)."""
    if name not in SERVABLE:
        raise ValueError(f"pipeline {name!r}: accepted {', '.join(SERVABLE)}")
    return importlib.import_module(f"ltx_pipelines.{name}").COMMAND


def describe(name: str) -> ServedPipeline:
    from ltx_pipelines.cli.guidance_flags import GuidanceFlags
    from ltx_pipelines.engine.model_versions import ONE_STAGE_SPATIAL_MULTIPLE, TWO_STAGE_SPATIAL_MULTIPLE

    command = command_of(name)
    return ServedPipeline(
        name=name,
        guided=any(isinstance(group, GuidanceFlags) for group in command.groups),
        spatial_multiple=TWO_STAGE_SPATIAL_MULTIPLE if command.models.two_stage else ONE_STAGE_SPATIAL_MULTIPLE,
    )


def parse_pipelines(text: str) -> tuple[str, ...]:
    """`--pipelines a,b` as names, in order, each once (ValueError naming what is accepted)."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise ValueError(f"--pipelines {text!r}: name at least one of {', '.join(SERVABLE)}")
    for name in names:
        if name not in SERVABLE:
            raise ValueError(f"--pipelines: {name!r} is not served; accepted {', '.join(SERVABLE)}")
    return names


def split_model_argv(names: Sequence[str], argv: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The server's pipeline flags, per pipeline: each gets the flags its command takes (so one server can hold
    `--distilled-checkpoint-path` for the distilled pipeline and `--checkpoint-path` for the guided ones). A
    flag that no served pipeline takes is a ValueError, at start-up rather than on the first job."""
    unknown_to_all: set[str] | None = None
    per_pipeline = {}
    for name in names:
        command = command_of(name)
        parser = command.parser(command.help_defaults())
        _, unknown = parser.parse_known_args([*argv, *_PLACEHOLDER_JOB])
        per_pipeline[name] = _without(argv, unknown)
        flags = {token for token in unknown if token.startswith("-")}
        unknown_to_all = flags if unknown_to_all is None else unknown_to_all & flags
    if unknown_to_all:
        flag = next(token for token in argv if token in unknown_to_all)
        raise ValueError(f"{flag}: not a flag of the served pipelines ({', '.join(names)}); see their --help")
    return per_pipeline


def _without(argv: Sequence[str], unknown: Sequence[str]) -> tuple[str, ...]:
    """`argv` less the tokens argparse left over (they come back in argv's order)."""
    kept = []
    pending = list(unknown)
    for token in argv:
        if pending and token == pending[0]:
            pending.pop(0)
            continue
        kept.append(token)
    return tuple(kept)
