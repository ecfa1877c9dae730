"""A checked CLI run whose pipeline is built with the worker's warm parts.

Every command's `build` passes `run.pipeline_options()` to its pipeline's constructor; a `WarmRun` adds the
worker's options there (its caching model builder, its resident text encoders, no progress bars), so each
pipeline is built by its own command and the server never names a pipeline class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ltx_pipelines.cli.command import Run


@dataclass(frozen=True)
class WarmRun(Run):
    warm_options: Mapping[str, Any] = field(default_factory=dict)
    """Constructor options added to those the command line sets."""

    def pipeline_options(self) -> dict[str, Any]:
        return {**super().pipeline_options(), **self.warm_options}


def warm_run(run: Run, **options: Any) -> WarmRun:
    return WarmRun(**{f.name: getattr(run, f.name) for f in fields(run)}, warm_options=options)
