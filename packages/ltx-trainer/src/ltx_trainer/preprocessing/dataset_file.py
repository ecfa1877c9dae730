"""Dataset metadata files (CSV, JSON list, JSONL): reading rows, naming column roles, writing them back.

Media paths in a metadata file are relative to the file's own folder (absolute paths are accepted
too). Every command that mirrors media paths into `.precomputed/` uses `relative_media_key`, so the
latents, audio latents, conditions and masks of one row share one relative name.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipelines.io.atomic_files import atomic_output

logger = logging.getLogger(__name__)

DATASET_SUFFIXES = (".csv", ".json", ".jsonl")

# Column roles process_dataset understands, and the legacy names still accepted for two of them.
KNOWN_ROLES = ("video", "audio", "caption", "reference_video", "reference_audio", "video_mask", "audio_mask")
LEGACY_ALIASES = {"media_path": "video", "ref_media_path": "reference_video"}


class DatasetFileError(ValueError):
    """A metadata file that cannot be read, or a row that lacks what a command needs."""


@dataclass(frozen=True)
class DatasetRow:
    """One row of a metadata file: its position (0-based, for messages) and its values."""

    index: int
    values: Mapping[str, Any]

    def get(self, column: str) -> str | None:
        value = self.values.get(column)
        if value is None:
            return None
        text = str(value).strip()
        # pandas-style CSV exports write missing cells as "nan"; treat them as empty.
        return text if text and text.lower() != "nan" else None


@dataclass(frozen=True)
class DatasetFile:
    path: Path
    rows: tuple[DatasetRow, ...]
    columns: tuple[str, ...]

    @property
    def root(self) -> Path:
        """The folder media paths are relative to."""
        return self.path.parent

    def media_path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.root / p

    def describe_row(self, row: DatasetRow) -> str:
        return f"{self.path.name} row {row.index + 1}"


def check_dataset_path(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetFileError(f"dataset file not found: {str(p)!r}")
    if not p.is_file():
        raise DatasetFileError(f"dataset path must be a file (csv, json or jsonl), not a folder: {str(p)!r}")
    if p.suffix.lower() not in DATASET_SUFFIXES:
        raise DatasetFileError(f"dataset file {str(p)!r} must end in one of {', '.join(DATASET_SUFFIXES)}")
    return p


def read_dataset(path: str | Path) -> DatasetFile:
    """Read every row; raises DatasetFileError naming the file (and line) that does not parse."""
    p = check_dataset_path(path)
    suffix = p.suffix.lower()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetFileError(f"cannot read dataset file {str(p)!r}: {e}") from None
    records: list[Mapping[str, Any]]
    if suffix == ".csv":
        records = list(csv.DictReader(text.splitlines()))
    elif suffix == ".json":
        try:
            data = json.loads(text) if text.strip() else []
        except json.JSONDecodeError as e:
            raise DatasetFileError(f"{str(p)!r} is not valid JSON: {e}") from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DatasetFileError(f"{str(p)!r} must hold a JSON list of objects, one per sample")
        records = data
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetFileError(f"{str(p)!r} line {number} is not valid JSON: {e}") from None
            if not isinstance(record, dict):
                raise DatasetFileError(f"{str(p)!r} line {number} must be a JSON object")
            records.append(record)
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    rows = tuple(DatasetRow(i, dict(r)) for i, r in enumerate(records))
    return DatasetFile(path=p, rows=rows, columns=tuple(columns))


def resolve_roles(columns: Sequence[str], overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """Role -> column name: by convention (`video`, `caption`, ...; `media_path`/`ref_media_path` as
    legacy aliases), then the explicit `overrides` (role -> column), which must exist."""
    roles: dict[str, str] = {}
    for column in columns:
        role = LEGACY_ALIASES.get(column, column)
        # The canonical name wins over its legacy alias when a file has both.
        if role in KNOWN_ROLES and (role not in roles or column == role):
            roles[role] = column
    for role, column in (overrides or {}).items():
        if column is None:
            continue
        if column not in columns:
            raise DatasetFileError(
                f"column {column!r} given for {role!r} is not in the dataset; its columns are {sorted(columns)}"
            )
        roles[role] = column
    return roles


def relative_media_key(dataset: DatasetFile, value: str) -> Path:
    """The media path relative to the dataset folder, used as the sample's name under `.precomputed/`.

    The path is normalised as written, without following symbolic links: a row `videos/a.mp4` that is a
    link to a clip elsewhere (how the skill stages media) is still named `videos/a`. A path outside the
    dataset folder (absolute, or climbing with `..`) keeps its own parts without the anchor, so its
    outputs never escape the output folder.
    """
    full = Path(os.path.abspath(dataset.media_path(value)))
    root = Path(os.path.abspath(dataset.root))
    try:
        return full.relative_to(root)
    except ValueError:
        parts = [part for part in full.parts[1:] if part not in ("..", ".")]
        return Path(*parts)


def write_records(path: str | Path, records: Sequence[Mapping[str, Any]], *, overwrite: bool = True) -> Path:
    """Write rows as JSON list / JSONL / CSV by the extension (`.txt`: one caption per line), atomically."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        text = json.dumps(list(records), indent=2, ensure_ascii=False) + "\n"
    elif suffix == ".jsonl":
        text = "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in records)
    elif suffix == ".csv":
        fields: dict[str, None] = {}
        for record in records:
            fields.update(dict.fromkeys(record))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(records)
        text = buffer.getvalue()
    elif suffix == ".txt":
        text = "".join(str(r.get("caption", "")).replace("\n", " ") + "\n" for r in records)
    else:
        raise DatasetFileError(f"unsupported output format {str(p)!r}; accepted: .json, .jsonl, .csv, .txt")
    with atomic_output(p, overwrite=overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return p
