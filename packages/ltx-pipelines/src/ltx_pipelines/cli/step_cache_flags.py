"""`--step-cache THRESHOLD`: reuse the transformer's deep-block residual on guided steps where its first block
barely changes (First-Block-Cache, `ltx_core.components.step_cache`). Off by default; only the guided stages
use it (their 30-40 steps with CFG/STG passes), never the distilled 8 + 3 steps."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext, Reading
from ltx_pipelines.engine.model_versions import PipelineDefaults


@dataclass(frozen=True)
class StepCacheFlags(FlagGroup["float | None"]):
    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        parser.add_argument_group("step cache").add_argument(
            "--step-cache",
            type=float,
            default=None,
            metavar="THRESHOLD",
            help="Reuse the deep transformer blocks' residual on a guided step whose first block changed by less "
            "than THRESHOLD (relative) since the last full call: faster, not identical (benchmarks/"
            "step_cache_guided.py measures calls saved and deviation; 0.15-0.3 to start). (default: off)",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[float | None]:
        return self._reading(self._value(args, context))

    def _reading(self, value: float | None, *, settle: bool = False) -> Reading[float | None]:
        return Reading(
            value,
            record=self._record(value),
            pipeline_options=self._pipeline_options(value),
            settle=settle,
        )

    def _value(self, args: argparse.Namespace, context: ReadContext) -> float | None:
        value = args.step_cache
        if value is not None and not (math.isfinite(value) and value > 0):
            raise FlagError(f"--step-cache {value} is not accepted: a threshold > 0 (leave it out for no cache)")
        return value

    def _record(self, value: float | None) -> dict[str, Any]:
        return {"step_cache": value}

    def _pipeline_options(self, value: float | None) -> dict[str, Any]:
        return {} if value is None else {"step_cache": value}
