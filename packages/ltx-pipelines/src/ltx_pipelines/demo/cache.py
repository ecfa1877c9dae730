"""The demo model sets in the user cache: built once, verified on every use, repaired when damaged.

Each family's files are built once and cached under the user cache directory, with a manifest of their
sizes and hashes: a cache that is partial or corrupted (a killed build, a truncated copy) is rebuilt, and
two processes that start at once build it only once (the build holds an advisory lock).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, overload

from ltx_pipelines.demo.files import PARTIAL_MARK
from ltx_pipelines.demo.ltx23 import DEMO_VERSION, DemoAssets, demo_assets_at
from ltx_pipelines.demo.ltx25 import DEMO_LTX25_VERSION, Ltx25DemoAssets, ltx25_demo_assets_at
from ltx_pipelines.engine.defaults import DEFAULT_DEMO_FAMILY, DEMO_FAMILIES
from ltx_pipelines.io.atomic_files import atomic_output, remove_stale_partials

logger = logging.getLogger(__name__)

AnyDemoAssets = DemoAssets | Ltx25DemoAssets

MANIFEST_NAME = "manifest.json"
_LOCK_NAME = ".build.lock"


def _check_family(family: str) -> str:
    if family not in DEMO_FAMILIES:
        raise ValueError(f"unknown demo model family {family!r}; accepted: {', '.join(DEMO_FAMILIES)}")
    return family


def _family_version(family: str) -> str:
    """The version a family's manifest records (a cache of another version is rebuilt)."""
    if family == "ltx-2.5":
        return f"ltx-2.5-v{DEMO_LTX25_VERSION}"
    return DEMO_VERSION


def default_demo_dir(family: str = DEFAULT_DEMO_FAMILY) -> Path:
    """The user-cache folder of a family's demo set (LTX-2.3 keeps the folder it always had)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "ltx2-demo"
    if _check_family(family) == "ltx-2.5":
        return base / _family_version(family)
    return base / f"v{DEMO_VERSION}"


# ---- the manifest: what a complete cache holds -----------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _describe(root: Path, part_path: Path) -> dict[str, dict[str, Any]]:
    files = sorted(p for p in part_path.rglob("*") if p.is_file()) if part_path.is_dir() else [part_path]
    return {str(f.relative_to(root)): {"bytes": f.stat().st_size, "sha256": _sha256(f)} for f in files}


def _intact(root: Path, files: Any) -> bool:
    if not isinstance(files, dict) or not files:
        return False
    for name, expected in files.items():
        path = root / name
        try:
            if path.stat().st_size != expected["bytes"] or _sha256(path) != expected["sha256"]:
                return False
        except (OSError, KeyError, TypeError):
            return False
    return True


def _version_of(assets: AnyDemoAssets) -> str:
    return _family_version("ltx-2.3" if isinstance(assets, DemoAssets) else "ltx-2.5")


def stale_parts(root: Path, assets: AnyDemoAssets) -> list[str]:
    """Names of the parts that are missing, partial or differ from the manifest (all of them when the
    manifest itself is missing or unreadable)."""
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
        recorded = manifest["parts"] if manifest.get("demo_version") == _version_of(assets) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        recorded = {}
    return [name for name in assets.parts() if not _intact(root, recorded.get(name))]


def _write_manifest(root: Path, assets: AnyDemoAssets) -> None:
    parts = {name: _describe(root, path) for name, (path, _) in assets.parts().items()}
    text = json.dumps({"demo_version": _version_of(assets), "parts": parts}, indent=2, sort_keys=True) + "\n"
    with atomic_output(root / MANIFEST_NAME, overwrite=True) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _remove_leftovers(root: Path) -> None:
    # Called with the build lock held: any partial file or folder is from a build that died.
    remove_stale_partials(root, min_age_s=0.0)
    for leftover in root.glob(f".*{PARTIAL_MARK}"):
        logger.info("removing %s, left by an interrupted demo build", leftover)
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """An exclusive advisory lock on `root` (fcntl.flock; per open file, so threads exclude each other too)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): concurrent builds then only cost time, the renames stay atomic
        yield
        return
    with (root / _LOCK_NAME).open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process that is building the demo models in %s", root)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@overload
def ensure_demo_assets(root: Path | None = None, *, family: Literal["ltx-2.3"] = ...) -> DemoAssets: ...


@overload
def ensure_demo_assets(root: Path | None = None, *, family: Literal["ltx-2.5"]) -> Ltx25DemoAssets: ...


@overload
def ensure_demo_assets(root: Path | None = None, *, family: str) -> AnyDemoAssets: ...


def ensure_demo_assets(root: Path | None = None, *, family: str = DEFAULT_DEMO_FAMILY) -> AnyDemoAssets:
    """The demo model set of `family` under `root` (default: the user cache), built or repaired where
    needed: `DemoAssets` for `ltx-2.3` (single file, upsampler, Gemma 3 folder), `Ltx25DemoAssets` for
    `ltx-2.5` (split component files; `.model_files()` is the set the pipelines take).

    A complete cache is only verified (sizes and hashes against its manifest). Otherwise the missing
    or damaged parts are rebuilt under a lock, so concurrent callers build once and never see a
    half-written file; the manifest is written last.
    """
    _check_family(family)
    root = Path(root) if root is not None else default_demo_dir(family)
    root.mkdir(parents=True, exist_ok=True)
    assets: AnyDemoAssets = ltx25_demo_assets_at(root) if family == "ltx-2.5" else demo_assets_at(root)
    if not stale_parts(root, assets):
        return assets
    with _build_lock(root):
        stale = stale_parts(root, assets)  # another process may have finished the build while we waited
        if stale:
            _remove_leftovers(root)
            logger.info("building demo models (%s) in %s", ", ".join(stale), root)
            parts = assets.parts()
            for name in stale:
                path, write = parts[name]
                write(path)
            _write_manifest(root, assets)
    return assets
