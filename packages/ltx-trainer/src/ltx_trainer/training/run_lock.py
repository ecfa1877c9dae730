"""One training at a time per `output_dir`: a lock file held for the run's lifetime.

`output_dir/.training.lock` is created exclusively (O_EXCL) and holds the owner's pid, host and start
time as JSON. A second run finds it and stops, naming the first. A lock whose process is gone (same host,
pid no longer alive) is stale: it is replaced, with a warning. A lock from another host cannot be checked
and is honoured; the message says which file to remove if that run is known to be over.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_NAME = ".training.lock"


class OutputDirLocked(RuntimeError):
    """Another training holds the output folder."""


@dataclass(frozen=True)
class LockOwner:
    pid: int
    host: str
    started: str

    @staticmethod
    def current() -> LockOwner:
        return LockOwner(os.getpid(), socket.gethostname(), time.strftime("%Y-%m-%d %H:%M:%S"))

    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return True  # cannot tell: honour it
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True


def _read_owner(path: Path) -> LockOwner | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LockOwner(int(data["pid"]), str(data["host"]), str(data.get("started", "?")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # Being written this instant, or damaged: treat as held by an unknown live run.
        return LockOwner(-1, "?", "?")


def check_unlocked(output_dir: Path) -> None:
    """Raise `OutputDirLocked` if a live run holds `output_dir` (before any heavy work)."""
    owner = _read_owner(output_dir / LOCK_NAME)
    if owner is not None and owner.pid != os.getpid() and owner.alive():
        raise OutputDirLocked(_held_message(output_dir, owner))


def _held_message(output_dir: Path, owner: LockOwner) -> str:
    who = f"pid {owner.pid} on {owner.host}, started {owner.started}" if owner.pid >= 0 else "an unreadable lock"
    return (
        f"output_dir {str(output_dir)!r} is in use by another training ({who}); wait for it to finish or choose "
        f"another output_dir (if that run is gone, delete {str(output_dir / LOCK_NAME)!r})"
    )


class RunLock:
    """The lock on an output folder: `acquire()` takes it (or raises `OutputDirLocked`), `release()` drops
    it. Also a context manager."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.path = output_dir / LOCK_NAME
        self.held = False

    def acquire(self) -> RunLock:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        me = LockOwner.current()
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                owner = _read_owner(self.path)
                if owner is None:
                    continue  # released meanwhile
                if owner.alive() and owner.pid != me.pid:
                    raise OutputDirLocked(_held_message(self.output_dir, owner)) from None
                logger.warning("replacing the stale lock of pid %d on %s (that process is gone)", owner.pid, owner.host)
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"pid": me.pid, "host": me.host, "started": me.started}, f)
            self.held = True
            return self
        raise OutputDirLocked(f"could not take the lock {str(self.path)!r}; another run keeps replacing it")

    def release(self) -> None:
        if self.held:
            owner = _read_owner(self.path)
            if owner is not None and owner.pid == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
