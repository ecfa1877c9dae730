"""Captions for a list of media written into a dataset file, kept across interruptions.

Output rows are `{"caption": ..., "media_path": ...}` with paths relative to the output file, in
JSON, JSONL, CSV or TXT by the output's extension. The file is rewritten (atomically) every few
captions, so an interrupted run keeps its work; a rerun skips media that already have a caption
unless `override`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ltx_pipelines.io.progress import progress
from ltx_trainer.captioning.base import Captioner
from ltx_trainer.preprocessing.dataset_file import DatasetFileError, read_dataset, write_records
from ltx_trainer.preprocessing.drop_report import RunReport

logger = logging.getLogger(__name__)

OUTPUT_SUFFIXES = (".json", ".jsonl", ".csv", ".txt")


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def _existing_records(out: Path) -> dict[str, dict]:
    """The rows already in `out` (a .txt output holds captions only, so none), by media path."""
    records: dict[str, dict] = {}
    if out.exists() and out.suffix.lower() != ".txt":
        for row in read_dataset(out).rows:
            path = row.get("media_path")
            if path:
                records[path] = dict(row.values)
    return records


def _to_caption(
    media: Sequence[Path], root: Path, records: dict[str, dict], override: bool, report: RunReport
) -> list[tuple[str, Path]]:
    """(key, path) of the media without a caption yet (all of them with `override`)."""
    todo: list[tuple[str, Path]] = []
    for path in media:
        key = _relative(path, root)
        if not override and (records.get(key) or {}).get("caption"):
            report.skip("caption")
        else:
            todo.append((key, path))
    return todo


def caption_media(
    media: Sequence[Path],
    output: str | Path,
    captioner: Captioner,
    *,
    override: bool = False,
    save_every: int = 5,
    num_workers: int = 1,
) -> RunReport:
    """Caption `media` into `output`, keeping captions already there (unless `override`)."""
    out = Path(output)
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DatasetFileError(f"output {str(out)!r} must end in one of {', '.join(OUTPUT_SUFFIXES)}")
    records = _existing_records(out)
    report = RunReport()
    todo = _to_caption(media, out.parent, records, override, report)
    if not todo:
        return report

    pending = 0

    def save() -> None:
        write_records(out, list(records.values()), overwrite=True)

    def work(item: tuple[str, Path]) -> tuple[str, Path, str | None, str | None]:
        key, path = item
        try:
            return key, path, captioner.caption(path), None
        except Exception as e:  # one bad file must not end the run; it is reported at the end
            return key, path, None, f"{type(e).__name__}: {e}"

    runner: Callable = map
    pool = ThreadPoolExecutor(max_workers=num_workers) if num_workers > 1 else None
    if pool is not None:
        runner = pool.map
    try:
        for key, _path, caption, error in progress(
            runner(work, todo), desc=f"captions ({captioner.name})", total=len(todo), unit="file"
        ):
            if error is not None:
                report.drop("caption", key, error)
                continue
            records[key] = {**records.get(key, {}), "caption": caption, "media_path": key}
            report.wrote("caption")
            pending += 1
            if pending >= save_every:
                save()
                pending = 0
    finally:
        # Also on Ctrl-C or a crash: what was captioned so far is kept.
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if pending:
            save()
    return report
