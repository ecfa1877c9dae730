"""A checkpoint's `model_version` metadata as a comparable tuple (no torch: command lines pick their defaults
by it before any model is imported)."""

from __future__ import annotations


def parse_model_version(version: str | None) -> tuple[int, ...]:
    """'2.3.0' -> (2, 3, 0); '2.3.rc1' -> (2, 3). Unknown -> ()."""
    if not version:
        return ()
    parts: list[int] = []
    for piece in str(version).split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)
