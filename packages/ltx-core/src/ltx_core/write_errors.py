"""Recognising why writing a file failed, for one-line command-line errors.

A full disk reaches the caller in three shapes: an `OSError` with ENOSPC / EDQUOT (Python's own writes),
safetensors' error wrapping Rust's (`StorageFull`, os error 28), and torch.save's stream writer, which
checks positions instead of errno (`[enforce fail at inline_container.cc:671] . unexpected pos 704 vs 598`;
newer torch: `... file write failed`): a full disk is what cuts its write short.
"""

from __future__ import annotations

import errno
from pathlib import Path

_DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_NO_PERMISSION = {errno.EACCES, errno.EPERM, errno.EROFS}


class OutputWriteError(RuntimeError):
    """An output could not be written (a full disk, a read-only folder); nothing partial was kept."""


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in _DISK_FULL
    text = str(exc)
    if "inline_container.cc" in text and ("unexpected pos" in text or "file write failed" in text):
        return True
    return "StorageFull" in text or "No space left on device" in text or "QuotaExceeded" in text


def write_failure(exc: BaseException, target: str | Path) -> OutputWriteError | None:
    """The one-line error for `exc` raised while writing `target`, or None when it is not a write failure
    (a full disk, no permission, a read-only file system)."""
    if is_disk_full(exc):
        return OutputWriteError(
            f"no space left on the device while writing {str(target)!r}; nothing was kept. Free space and run again"
        )
    if isinstance(exc, OSError) and exc.errno in _NO_PERMISSION:
        where = exc.filename or Path(target).parent
        return OutputWriteError(
            f"cannot write {str(target)!r}: {exc.strerror or exc} ({where}); choose a writable folder"
        )
    return None
