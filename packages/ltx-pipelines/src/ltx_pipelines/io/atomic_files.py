"""Writing outputs safely: a temporary name beside the target, renamed into place only when complete.

Nothing that already exists is replaced unless the caller says so (`overwrite=True`, the CLI's
`--overwrite`), and a failed write leaves neither a partial file nor a changed original.

An output and its `.json` sidecar are written as one transaction (`output_with_sidecar`): both paths checked,
the file written under a temporary name, both put in place together when the writer is done, nothing left
behind when it fails.

Temporary files are hidden (`.clip.mp4.<random>.partial.mp4`) and locked (`fcntl.flock`) for as long as
their writer lives, so a later run in the same folder can tell the leftovers of a killed run (unlocked)
from the work of a run still going (locked) and remove only the former (`remove_stale_partials`).
Each temporary file is flushed to disk before it is renamed, and the folder after, so a power cut
never leaves a complete-looking name over incomplete data.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

PARTIAL_MARK = ".partial"
# `.{target name}.{mkstemp's 8 random characters}.partial{target suffix}`: only our own temporary files.
_PARTIAL_NAME = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.partial(\.[^./]+)?$")
# A live writer locks its temporary file right after creating it; a file younger than this may be in
# that instant, so it is never taken for a leftover.
STALE_PARTIAL_MIN_AGE_S = 60.0
_MAX_NUMBERED = 10_000


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


def sidecar_path(output_path: str | Path) -> Path:
    """Where the run parameters of an output go: beside it, same stem, `.json`."""
    return Path(output_path).with_suffix(".json")


def numbered_path(path: Path, number: int, suffix: str | None = None) -> Path:
    """`clip.mp4` -> `clip-3.mp4` (number 0 is the path itself). `suffix`: the ending the number goes
    before when it is longer than the last suffix (`clip.latents.safetensors` -> `clip-3.latents.safetensors`)."""
    if number == 0:
        return path
    ending = path.suffix if suffix is None else suffix
    return path.with_name(f"{path.name[: len(path.name) - len(ending)]}-{number}{ending}")


def check_output_pair(path: str | Path, *, overwrite: bool, checked_at_start: bool = False) -> Path:
    """`check_output_path` for an output and its sidecar. A run whose path was checked when it began
    (`checked_at_start`) accepts a name taken since: its writer then moves to a numbered one."""
    tolerate_existing = overwrite or checked_at_start
    target = check_output_path(path, overwrite=tolerate_existing)
    check_output_path(sidecar_path(target), overwrite=tolerate_existing)
    return target


# ---- permissions and durability -----------------------------------------------------------------------


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (setting it briefly would be seen
    by other threads creating files at that moment)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def apply_umask(path: Path) -> None:
    """Give `path` (and everything below a folder) the permissions a plain open()/mkdir() would: some
    writers (mkstemp, safetensors, parts of transformers) create files private whatever the umask says."""
    umask = current_umask()
    for item in (path, *(path.rglob("*") if path.is_dir() else ())):
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~umask)


def fsync_file(path: Path) -> None:
    """Flush a written file's data to the disk (before it is renamed into place)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (after a rename in it). Not every OS can open a folder; that is no error."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- temporary files and their locks --------------------------------------------------------------------


def _try_lock(fd: int) -> bool:
    """An exclusive, non-blocking advisory lock on an open file; True without fcntl (nothing to check)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; an open file there cannot be deleted by another run anyway
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


@contextmanager
def partial_file(target: str | Path) -> Iterator[Path]:
    """A new empty temporary file in `target`'s folder (created if needed), locked for the block.

    The caller writes it and usually renames it into place inside the block (`publish_file`,
    `publish_with_sidecar`); whatever is still at the temporary name when the block ends is removed.
    The name keeps the target's suffix so tools choosing a format from the extension still work.
    """
    target = Path(target).expanduser().absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f"{PARTIAL_MARK}{target.suffix}")
    tmp = Path(name)
    try:
        _try_lock(fd)  # just created: nobody else can hold it
        # mkstemp creates the file private (0600); give the output the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~current_umask())
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)
        os.close(fd)  # releases the lock, after the name is gone


def remove_stale_partials(folder: str | Path, *, min_age_s: float = STALE_PARTIAL_MIN_AGE_S) -> list[Path]:
    """Remove the temporary files that killed runs left in `folder`, reporting each; return them.

    A temporary file is stale when no process holds its lock (its writer is gone) and it is older than
    `min_age_s` (a writer locks its file right after creating it). Files of runs still going are left.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    now = time.time()
    for path in sorted(folder.iterdir()):
        if not _PARTIAL_NAME.match(path.name) or not path.is_file():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile by its writer
        try:
            age = now - os.fstat(fd).st_mtime
            if age < min_age_s or not _try_lock(fd):
                continue
            size = os.fstat(fd).st_size
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
        logger.warning("removed %s (%d bytes), a temporary file left by an interrupted run", path, size)
        removed.append(path)
    return removed


# ---- putting finished files in place -----------------------------------------------------------------------


def _link_new(tmp: Path, target: Path) -> None:
    """Give the finished `tmp` the name `target` unless that name exists (FileExistsError then).

    A hard link fails atomically when the target appeared meanwhile; filesystems without hard links get
    a checked rename (a file appearing in between could then be replaced).
    """
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:
        if target.exists():
            raise FileExistsError(target) from None
        os.replace(tmp, target)
    else:
        tmp.unlink()


def publish_file(tmp: Path, target: Path, *, overwrite: bool) -> None:
    """Flush `tmp` and rename it to `target` (replacing it only with `overwrite`)."""
    fsync_file(tmp)
    if overwrite:
        os.replace(tmp, target)
    else:
        try:
            _link_new(tmp, target)
        except FileExistsError:
            raise OutputExistsError(
                f"output {str(target)!r} appeared while it was being written; pass --overwrite to replace it"
            ) from None
    fsync_folder(target.parent)


@contextmanager
def atomic_output(path: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success it becomes `path`, on error it is removed."""
    target = check_output_path(path, overwrite=overwrite)
    with partial_file(target) as tmp:
        yield tmp
        publish_file(tmp, target, overwrite=overwrite)


def _replace_together(pairs: list[tuple[Path, Path]]) -> None:
    """Rename each finished temporary file over its target, all or none.

    The existing targets are first hard-linked to backup names; if any rename fails (or the run is
    interrupted) the targets are put back as they were, so a video and its sidecar are only ever
    replaced as a pair.
    """
    backups: dict[Path, Path] = {}
    try:
        for _, target in pairs:
            if target.exists():
                backup = target.with_name(f".{target.name}.{os.getpid()}-{time.monotonic_ns()}.old{PARTIAL_MARK}")
                os.link(target, backup)
                backups[target] = backup
        done: list[Path] = []
        try:
            for tmp, target in pairs:
                os.replace(tmp, target)
                done.append(target)
        except BaseException:
            for target in done:
                if target in backups:
                    os.replace(backups[target], target)
                else:
                    target.unlink(missing_ok=True)  # it did not exist before this call
            raise
    finally:
        for backup in backups.values():
            backup.unlink(missing_ok=True)


def publish_with_sidecar(
    tmp: Path, target: Path, sidecar_text: Callable[[Path], str], *, overwrite: bool
) -> tuple[Path, Path]:
    """Put the finished file `tmp` at `target` together with its `.json` sidecar; return both paths.

    `sidecar_text(final_path)` gives the sidecar's content for the name the file finally gets.
    With `overwrite`, an existing pair is replaced as a pair (on any failure both stay as they were).
    Without it, a name taken while the run was working does not cost the result: the pair goes to the
    first free numbered name (`clip-1.mp4` + `clip-1.json`), with a warning. The sidecar is given its
    name first, so a video never appears without its sidecar.
    """
    target = Path(target).expanduser().absolute()
    fsync_file(tmp)
    with partial_file(sidecar_path(target)) as json_tmp:
        if overwrite:
            json_tmp.write_text(sidecar_text(target), encoding="utf-8")
            fsync_file(json_tmp)
            _replace_together([(tmp, target), (json_tmp, sidecar_path(target))])
            fsync_folder(target.parent)
            return target, sidecar_path(target)
        for number in range(_MAX_NUMBERED):
            candidate = numbered_path(target, number)
            json_target = sidecar_path(candidate)
            json_tmp.write_text(sidecar_text(candidate), encoding="utf-8")
            fsync_file(json_tmp)
            try:
                _link_new(json_tmp, json_target)
            except FileExistsError:
                continue
            try:
                _link_new(tmp, candidate)
            except FileExistsError:
                json_target.unlink()  # ours, named a moment ago; the next candidate rewrites the temporary file
                continue
            except BaseException:
                json_target.unlink(missing_ok=True)
                raise
            fsync_folder(target.parent)
            if number:
                logger.warning(
                    "%s appeared while this run was writing it; the result was written as %s and %s instead",
                    target,
                    candidate.name,
                    json_target.name,
                )
            return candidate, json_target
    raise OutputExistsError(f"no free numbered name for {str(target)!r} (tried up to {_MAX_NUMBERED - 1})")


@dataclass
class OutputPair:
    """An output being written by `output_with_sidecar`: write the file at `temporary` and say what its sidecar
    records (`sidecar`, before the block ends); `published` and `published_sidecar` are where both went."""

    target: Path
    temporary: Path
    sidecar: Mapping[str, Any] | None = None
    """The sidecar's content; its "output" entry is set to the name the file finally gets."""
    published: Path | None = None
    published_sidecar: Path | None = None


@contextmanager
def output_with_sidecar(
    path: str | Path, *, overwrite: bool = False, checked_at_start: bool = False
) -> Iterator[OutputPair]:
    """Write an output and its `.json` sidecar as one transaction.

    On entry both paths are checked (`check_output_pair`), the leftovers of killed runs in the folder are
    removed, and the output gets its temporary name (`OutputPair.temporary`). When the block ends with the
    sidecar set, the file and its sidecar are put in place together (`publish_with_sidecar`: a pair replaced
    only with `overwrite`, else the first free numbered names). An error in the block (or no sidecar)
    removes the temporary file and leaves every existing file as it was.
    """
    target = check_output_pair(path, overwrite=overwrite, checked_at_start=checked_at_start)
    remove_stale_partials(target.parent)
    with partial_file(target) as tmp:
        pair = OutputPair(target=target, temporary=tmp)
        yield pair
        sidecar = pair.sidecar
        if sidecar is None:
            raise ValueError(f"output {str(target)!r} was written without its sidecar's content")
        pair.published, pair.published_sidecar = publish_with_sidecar(
            tmp, target, lambda final: json_text({**sidecar, "output": final.name}), overwrite=overwrite
        )


def write_safetensors(
    path: str | Path,
    tensors: Mapping[str, Any],
    metadata: Mapping[str, Any],
    *,
    overwrite: bool = False,
    first_free_suffix: str | None = None,
) -> Path:
    """Write a safetensors file atomically; return its path. Metadata strings are stored as they are, other
    values as their JSON (`json_text`). An existing file is replaced only with `overwrite`; with
    `first_free_suffix` a taken name moves the file to the first free numbered one instead
    (`numbered_path(path, n, first_free_suffix)`), never over another file."""
    from safetensors.torch import save_file

    text = {key: value if isinstance(value, str) else json_text(value) for key, value in metadata.items()}
    path = Path(path).expanduser().absolute()
    for number in range(_MAX_NUMBERED if first_free_suffix is not None and not overwrite else 1):
        candidate = numbered_path(path, number, first_free_suffix)
        try:
            with atomic_output(candidate, overwrite=overwrite) as tmp:
                save_file(dict(tensors), str(tmp), metadata=text)
                apply_umask(tmp)  # safetensors recreates the file private
        except OutputExistsError:
            if first_free_suffix is None:
                raise
            continue
        return candidate
    raise OutputExistsError(f"no free numbered name for {str(path)!r} (tried up to {_MAX_NUMBERED - 1})")


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


def json_text(data: Mapping[str, Any]) -> str:
    """`data` as the indented JSON the sidecars use (Paths, enums, dataclasses, tuples converted)."""
    return json.dumps(data, indent=2, sort_keys=True, default=_to_json, ensure_ascii=False) + "\n"


def write_json_atomic(path: str | Path, data: Mapping[str, Any], *, overwrite: bool = False) -> Path:
    """Write `data` as indented JSON (Paths, enums, dataclasses, tuples converted) via a temporary file."""
    text = json_text(data)
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    logger.info("wrote %s", path)
    return Path(path).expanduser().absolute()
