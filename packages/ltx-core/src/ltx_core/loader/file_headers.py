"""The headers of the weight files one set of model files reads, each read from disk once.

A run asks its model files many header-only questions before and while it builds models (the model version,
the config sections, whether a duration head is there, which video decoder the VAE calls for, the tensor
index of every file a model is loaded from). The answers live on the value the run holds - a `ModelFiles`
set, or one standalone `ComponentSource` - not in a module-level cache: two sets read the same path apart,
and a set that is dropped takes its headers with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_core.loader.file_index import SafetensorsHeader
from ltx_core.loader.safetensors_header import read_safetensors_header


class FileHeaders:
    """Each file's header (tensor index and metadata) as read the first time it was asked for.

    The files are assumed unchanged for the life of the value (one run, or one pipeline): a header that
    changed meanwhile would also have changed the weights the models were checked against."""

    def __init__(self) -> None:
        self._headers: dict[Path, SafetensorsHeader] = {}

    def header(self, path: str | Path) -> SafetensorsHeader:
        key = Path(path).expanduser()
        found = self._headers.get(key)
        if found is None:
            found = self._headers[key] = read_safetensors_header(key)
        return found

    def metadata(self, path: str | Path) -> dict[str, Any]:
        return self.header(path).metadata

    def holds(self, path: str | Path) -> bool:
        """Whether `path`'s header was read already (for tests and logging)."""
        return Path(path).expanduser() in self._headers

    def __len__(self) -> int:
        return len(self._headers)
