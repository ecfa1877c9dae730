"""A cache of loaded state dicts so that pipeline stages sharing a file read it once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.state_dict import StateDict

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _FileIdentity:
    path: str
    mtime_ns: int
    size: int


@dataclass(frozen=True)
class _CacheKey:
    files: tuple[_FileIdentity, ...]
    ops: SDOps | tuple[SDOps, ...]  # one rule set, or one per file
    dtype: torch.dtype | None


class StateDictCache:
    """Holds clean (LoRA-free) state dicts keyed by file identity, rule set and dtype.

    Cached tensors are never modified: LoRA fusion writes new tensors. Evict an entry (or clear the
    cache) to give its memory back once no model uses those weights any more.
    """

    def __init__(self) -> None:
        self._entries: dict[_CacheKey, StateDict] = {}

    @staticmethod
    def _key(
        paths: str | Path | Sequence[str | Path], ops: SDOps | tuple[SDOps, ...], dtype: torch.dtype | None
    ) -> _CacheKey:
        files = []
        for path in [paths] if isinstance(paths, (str, Path)) else paths:
            p = Path(path).resolve()
            st = p.stat()
            files.append(_FileIdentity(str(p), st.st_mtime_ns, st.st_size))
        return _CacheKey(tuple(files), ops, dtype)

    def get_or_load(
        self,
        paths: str | Path | Sequence[str | Path],
        ops: SDOps | tuple[SDOps, ...],
        dtype: torch.dtype | None,
        load: Callable[[], StateDict],
    ) -> StateDict:
        """The state dict read from `paths` (one file, or the files of one component) with `ops`."""
        key = self._key(paths, ops, dtype)
        if key not in self._entries:
            self._entries[key] = load()
        else:
            logger.debug("state dict cache hit: %s", [f.path for f in key.files])
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def evict(self, path: str | Path) -> int:
        """Drop every entry read (in whole or in part) from `path`; returns how many were dropped."""
        target = str(Path(path).resolve())
        doomed = [k for k in self._entries if any(f.path == target for f in k.files)]
        for k in doomed:
            del self._entries[k]
        return len(doomed)

    def clear(self) -> None:
        self._entries.clear()
