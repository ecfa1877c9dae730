"""One training at a time per `output_dir`: a lock file held for the run's lifetime.

`output_dir/.training.lock` holds the owner's pid, host and start time as JSON, and the owner holds an
OS lock on it (`fcntl.flock`) from `acquire` to `release`. Taking the OS lock is the one atomic step
that decides between runs started together: the kernel grants it to one open file at a time and drops
it when its process dies, so a lock file left by a killed run (kill -9) is free to take over, by one
run only. Whoever gets it then checks the path still names the file it locked (a release unlinks the
file: a run that opened it just before then locked a dead file and tries again).

A second run finds the OS lock held and stops, naming the first. A recorded owner that is still alive
(a run of an older version, which held no OS lock, or a run on another host, which a network file system
may not lock across) is honoured too; the message says which file to remove if that run is known to be
over. Where the file system has no `flock` (or on Windows), only the record decides, which is not atomic.
"""

from __future__ import annotations

import errno
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


def _parse_owner(raw: bytes) -> LockOwner:
    try:
        data = json.loads(raw.decode("utf-8"))
        return LockOwner(int(data["pid"]), str(data["host"]), str(data.get("started", "?")))
    except (ValueError, KeyError, TypeError):
        # Being written this instant, or damaged: treat as held by an unknown live run.
        return LockOwner(-1, "?", "?")


def _read_owner(path: Path) -> LockOwner | None:
    try:
        return _parse_owner(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError:
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


def _os_lock(fd: int) -> bool | None:
    """Take the OS lock on `fd` without waiting: True taken, False held elsewhere, None not supported."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return False if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
    return True


def _names_file(path: Path, fd: int) -> bool:
    """Whether `path` is still the file open as `fd` (not unlinked or replaced since it was opened)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (opened.st_dev, opened.st_ino)


def _owner_of_held_lock(path: Path) -> LockOwner:
    """The owner of a lock another run holds: it may be rewriting the record this instant (empty, or
    still the stale owner it replaces), so wait briefly for a live one."""
    deadline = time.monotonic() + 0.25
    while True:
        owner = _read_owner(path)
        if (owner is not None and owner.pid >= 0 and owner.alive()) or time.monotonic() > deadline:
            return owner or LockOwner(-1, "?", "?")
        time.sleep(0.01)


class RunLock:
    """The lock on an output folder: `acquire()` takes it (or raises `OutputDirLocked`), `release()` drops
    it. Also a context manager."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.path = output_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        me = LockOwner.current()
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                locked = _os_lock(fd)
                if locked is False:
                    raise OutputDirLocked(_held_message(self.output_dir, _owner_of_held_lock(self.path)))
                if not _names_file(self.path, fd):
                    os.close(fd)  # released (unlinked) between our open and our lock: try the new file
                    continue
                raw = os.pread(fd, 1 << 16, 0)
                previous = _parse_owner(raw) if raw else None  # empty: just created (by us or a racing run)
                if previous is not None and previous.pid >= 0 and previous.pid != me.pid and previous.alive():
                    raise OutputDirLocked(_held_message(self.output_dir, previous))
                if previous is not None and previous.pid < 0 and locked is None:
                    raise OutputDirLocked(_held_message(self.output_dir, previous))  # no OS lock to tell
                if previous is not None:
                    # Under our OS lock a dead owner, or a damaged record, is what a killed run left.
                    logger.warning(
                        "replacing the stale lock of pid %d on %s (that process is gone)", previous.pid, previous.host
                    )
                record = json.dumps({"pid": me.pid, "host": me.host, "started": me.started}).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, record, 0)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            return self
        raise OutputDirLocked(f"could not take the lock {str(self.path)!r}; another run keeps replacing it")

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if _names_file(self.path, fd):
                self.path.unlink(missing_ok=True)  # while still locked: no run can take it in between
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
