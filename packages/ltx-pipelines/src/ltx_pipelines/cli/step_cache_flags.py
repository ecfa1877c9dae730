"""`--step-cache THRESHOLD`: reuse the transformer's deep-block residual on guided steps where its first block
barely changes (First-Block-Cache, `ltx_core.components.step_cache`). Off by default; only the guided stages
use it (their 30-40 steps with CFG/STG passes), never the distilled 8 + 3 steps."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading


@dataclass(frozen=True)
class StepCacheFlags(FlagGroup["float | None"]):
    sections = (
        FlagSection(
            "step cache",
            (
                Flag(
                    "--step-cache",
                    {
                        "type": float,
                        "default": None,
                        "metavar": "THRESHOLD",
                        "help": "Reuse the deep transformer blocks' residual on a guided step whose first block "
                        "changed by less than THRESHOLD (relative) since the last full call: faster, not identical "
                        "(benchmarks/step_cache_guided.py measures calls saved and deviation; 0.15-0.3 to start). "
                        "(default: off)",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[float | None]:
        value = args.step_cache
        if value is not None and not (math.isfinite(value) and value > 0):
            raise FlagError(f"--step-cache {value} is not accepted: a threshold > 0 (leave it out for no cache)")
        options = {} if value is None else {"step_cache": value}
        return Reading(value, record={"step_cache": value}, pipeline_options=options)
