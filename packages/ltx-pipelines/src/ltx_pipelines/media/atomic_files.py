"""Writing outputs safely: a temporary name beside the target, renamed into place only when complete.

Nothing that already exists is replaced unless the caller says so (`overwrite=True`, the CLI's
`--overwrite`), and a failed write leaves neither a partial file nor a changed original.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class OutputExistsError(FileExistsError):
    """The output path exists and overwriting was not asked for."""


def check_output_path(path: str | Path, *, overwrite: bool) -> Path:
    """Return `path` (user-expanded, absolute) if an output may be written there, else raise.

    Checks that the path is not an existing directory, that it does not exist unless `overwrite`,
    and that its folder exists or can be created (the nearest existing ancestor is a writable folder).
    """
    p = Path(path).expanduser().absolute()
    if p.is_dir():
        raise IsADirectoryError(f"output path {str(p)!r} is a directory; expected a file path")
    if p.exists() and not overwrite:
        raise OutputExistsError(f"output {str(p)!r} already exists; pass --overwrite (overwrite=True) to replace it")
    ancestor = p.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise NotADirectoryError(f"cannot create the folder of output {str(p)!r}: {str(ancestor)!r} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write output {str(p)!r}: folder {str(ancestor)!r} is not writable")
    return p


def _publish(tmp: Path, target: Path, *, overwrite: bool) -> None:
    if overwrite:
        os.replace(tmp, target)
        return
    # A hard link fails atomically when the target appeared meanwhile; fall back to a checked
    # rename on filesystems without hard links.
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise OutputExistsError(
            f"output {str(target)!r} appeared while it was being written; pass --overwrite to replace it"
        ) from None
    except OSError:
        if target.exists():
            raise OutputExistsError(f"output {str(target)!r} already exists; pass --overwrite to replace it") from None
        os.replace(tmp, target)
    else:
        tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_output(path: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success it becomes `path`, on error it is removed.

    The temporary name keeps the target's suffix (`.clip.mp4.<random>.partial.mp4`) so that tools
    choosing a format from the extension still work.
    """
    target = check_output_path(path, overwrite=overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".partial{target.suffix}")
    os.close(fd)
    tmp = Path(tmp_name)
    # mkstemp creates the file private (0600); give the output the permissions a plain open() would.
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
        _publish(tmp, target, overwrite=overwrite)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _to_json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    # torch dtypes/devices and other small values print as what a user would type.
    return str(value)


def sidecar_path(output_path: str | Path) -> Path:
    """Where the run parameters of an output go: beside it, same stem, `.json`."""
    return Path(output_path).with_suffix(".json")


def write_json_atomic(path: str | Path, data: Mapping[str, Any], *, overwrite: bool = False) -> Path:
    """Write `data` as indented JSON (Paths, enums, dataclasses, tuples converted) via a temporary file."""
    text = json.dumps(data, indent=2, sort_keys=True, default=_to_json, ensure_ascii=False) + "\n"
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    logger.info("wrote %s", path)
    return Path(path).expanduser().absolute()
