"""SIGTERM handled like Ctrl-C while training: the run stops where it is, except inside a checkpoint save,
which finishes first. Slurm, docker, `timeout` and systemd stop jobs with SIGTERM.

`StopSignals` installs the handlers for its block (in the main thread only; elsewhere it does nothing)
and puts the previous ones back after. `saving()` marks a block a signal must not cut: a signal that
arrives inside it is held and raised when the block ends.

A signal can arrive inside a C extension (a safetensors read, a gloo collective), which may then report
the pending `TrainingInterrupted` as an unrelated error of its own (torch turns it into a `TypeError`
about tensor shapes). So an ordinary error leaving a `StopSignals` block after a stop signal arrived is
re-raised as that signal, chained: the user stopped the run, and must not be told to delete a data file.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """A stop signal arrived; `signum` says which (exit status 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class StopSignals:
    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._depth = 0
        self._pending: int | None = None
        self.received: int | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = self.received or signum
        if self._depth:
            self._pending = signum  # raised when the save is complete
            return
        raise TrainingInterrupted(signum)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if isinstance(exc, Exception) and self.received is not None:
            raise TrainingInterrupted(self.received) from exc

    @contextmanager
    def saving(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if not self._depth and self._pending is not None:
            signum, self._pending = self._pending, None
            raise TrainingInterrupted(signum)
