"""Text encoders kept loaded between prompt encodings, for a process that encodes many prompts (a server's
warm worker). A one-off run loads Gemma, encodes and frees it before the transformer is built, so that the
two never share memory; a worker that owns its device keeps Gemma resident instead and skips the load
(tens of seconds for Gemma 3 12B) on every job after the first. The contexts are the same either way: the
same weights run the same forward."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ltx_core.text_encoders.gemma.text_encoder import GemmaTextEncoder


class ResidentTextEncoders:
    """Loaded text encoders by file and load options: `open` loads one on first use and yields the same one
    afterwards (never freeing it on exit); `release` frees them all."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, tuple[tuple[str, str], ...]], GemmaTextEncoder] = {}
        self.loads = 0
        """How many encoders were loaded (the rest of the `open`s reused one)."""

    @contextmanager
    def open(self, path: str | Path, **options: Any) -> Iterator[GemmaTextEncoder]:
        key = (str(Path(path).expanduser().resolve()), tuple(sorted((k, repr(v)) for k, v in options.items())))
        encoder = self._loaded.get(key)
        if encoder is None or encoder.is_released:
            encoder = GemmaTextEncoder.load(path, **options)
            self._loaded[key] = encoder
            self.loads += 1
        yield encoder

    def release(self) -> None:
        for encoder in self._loaded.values():
            encoder.release()
        self._loaded.clear()
