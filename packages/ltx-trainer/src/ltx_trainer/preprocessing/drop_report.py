"""The per-run record of what was written, skipped and dropped, printed as a table at the end."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Drop:
    path: str
    reason: str
    stage: str


@dataclass
class RunReport:
    """Counts per stage and every dropped sample with its reason (mutable: filled while a run goes)."""

    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    drops: list[Drop] = field(default_factory=list)
    items: int | None = None
    """How many samples (dataset rows) the run worked on, when it works per sample over several stages."""

    @property
    def nothing_done(self) -> bool:
        """Every item was dropped: no sample of the run is usable (a stage may still have written files for
        samples a later stage dropped)."""
        if self.items is not None:
            return self.items > 0 and len({d.path for d in self.drops}) >= self.items
        return bool(self.drops) and not self.written and not self.skipped

    def wrote(self, stage: str) -> None:
        self.written[stage] = self.written.get(stage, 0) + 1

    def skip(self, stage: str) -> None:
        self.skipped[stage] = self.skipped.get(stage, 0) + 1

    def drop(self, stage: str, path: str, reason: str) -> None:
        logger.warning("%s: dropped %s: %s", stage, path, reason)
        self.drops.append(Drop(path=path, reason=reason, stage=stage))

    @property
    def total_written(self) -> int:
        return sum(self.written.values())

    def merge(self, other: RunReport) -> None:
        for stage, n in other.written.items():
            self.written[stage] = self.written.get(stage, 0) + n
        for stage, n in other.skipped.items():
            self.skipped[stage] = self.skipped.get(stage, 0) + n
        self.drops.extend(other.drops)
        if other.items is not None:
            self.items = (self.items or 0) + other.items

    def render(self) -> str:
        """A plain-text summary: counts per stage, then a table of dropped samples (path, stage, reason)."""
        stages = sorted(set(self.written) | set(self.skipped) | {d.stage for d in self.drops})
        lines = ["stage             written  skipped  dropped"]
        for stage in stages:
            dropped = sum(1 for d in self.drops if d.stage == stage)
            lines.append(f"{stage:<17} {self.written.get(stage, 0):>7}  {self.skipped.get(stage, 0):>7}  {dropped:>7}")
        if self.drops:
            width = max(len("path"), *(len(d.path) for d in self.drops))
            lines += ["", f"{len(self.drops)} dropped sample(s):", f"{'path':<{width}}  {'stage':<16} reason"]
            lines += [f"{d.path:<{width}}  {d.stage:<16} {d.reason}" for d in self.drops]
        return "\n".join(lines)

    def print(self) -> None:
        """Print the summary as a rich table (falls back to plain text)."""
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:  # pragma: no cover - rich is a dependency
            print(self.render())
            return
        console = Console(stderr=True)
        counts = Table(title="preprocessing summary")
        for name in ("stage", "written", "skipped", "dropped"):
            counts.add_column(name)
        stages = sorted(set(self.written) | set(self.skipped) | {d.stage for d in self.drops})
        for stage in stages:
            dropped = sum(1 for d in self.drops if d.stage == stage)
            counts.add_row(stage, str(self.written.get(stage, 0)), str(self.skipped.get(stage, 0)), str(dropped))
        console.print(counts)
        if self.drops:
            table = Table(title=f"{len(self.drops)} dropped sample(s)")
            for name in ("path", "stage", "reason"):
                table.add_column(name, overflow="fold")
            for d in self.drops:
                table.add_row(d.path, d.stage, d.reason)
            console.print(table)
