"""A command module names its pipeline's classes without importing them: `python -m ltx_pipelines.<name>
--help` and the flag checks run before torch is imported (seconds saved on every bad command line)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def forward_to(module: str) -> Callable[[str], Any]:
    """A module `__getattr__` that finds every name the module lacks in `module` (imported on first use), so
    `from ltx_pipelines.distilled import DistilledPipeline` keeps working from the light command module."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(module), name)

    return __getattr__


def resolve(target: str) -> Any:
    """The object `module:name` names (its module imported now): a command builds its pipeline class through
    this only once its flags are checked."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
