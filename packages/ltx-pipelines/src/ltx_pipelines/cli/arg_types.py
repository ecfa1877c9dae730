"""argparse `type=` converters with messages that name the value and what is accepted."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ltx_pipelines.cli.model_resolution import is_hf_path
from ltx_pipelines.engine.model_versions import DEFAULT_LORA_STRENGTH

if TYPE_CHECKING:
    from ltx_core.loader import LoraSpec
    from ltx_pipelines.engine.denoising_stage import ImageCondition


def int_at_least(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer >= `minimum`."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is not accepted: it must be at least {minimum}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def finite_float(raw: str) -> float:
    """argparse type: a finite number."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a finite number")
    return value


def number_arg(action: argparse.Action, name: str, raw: str, kind: type) -> Any:
    try:
        return kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentError(action, f"{name} must be {what}; got {raw!r}") from None


class RepeatedValuesAction(argparse.Action):
    """A repeatable flag with several values: each use appends the item `parse_values` makes of them. A flag whose
    value count varies (`nargs="+"`) names the counts it accepts and the error for any other (`{count}`, `{values}`).
    """

    counts: ClassVar[tuple[int, ...] | None] = None
    count_error: ClassVar[str] = ""

    def parse_values(self, values: list[str]) -> Any:
        raise NotImplementedError

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if self.counts is not None and len(values) not in self.counts:
            raise argparse.ArgumentError(self, self.count_error.format(count=len(values), values=values))
        item = self.parse_values(values)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), item])


class ImageAction(RepeatedValuesAction):
    """`--image PATH FRAME_IDX STRENGTH [CRF]`, repeatable; appends an ImageCondition."""

    display_metavar = "PATH FRAME_IDX STRENGTH [CRF]"
    counts = (3, 4)
    count_error = "takes 3 or 4 values (PATH FRAME_IDX STRENGTH [CRF]); got {count}: {values}"

    def parse_values(self, values: list[str]) -> ImageCondition:
        from ltx_pipelines.engine.denoising_stage import ImageCondition

        return ImageCondition(
            path=Path(values[0]).expanduser(),
            frame_idx=number_arg(self, "FRAME_IDX", values[1], int),
            strength=number_arg(self, "STRENGTH", values[2], float),
            crf=number_arg(self, "CRF", values[3], int) if len(values) == 4 else None,
        )


class LoraAction(RepeatedValuesAction):
    """`--lora PATH [STRENGTH]`, repeatable; appends a LoraSpec (strength defaults to 1.0)."""

    display_metavar = "PATH [STRENGTH]"
    counts = (1, 2)
    count_error = "takes PATH and an optional STRENGTH; got {count} values: {values}"

    def parse_values(self, values: list[str]) -> LoraSpec:
        from ltx_core.loader import LoraSpec

        strength = number_arg(self, "STRENGTH", values[1], float) if len(values) == 2 else DEFAULT_LORA_STRENGTH
        path = values[0] if is_hf_path(values[0]) else Path(values[0]).expanduser()
        return LoraSpec(path, strength)
