"""Canny-edge reference videos for IC-LoRA, written beside each video and added to the dataset's
`reference_video` column (the command is `python -m ltx_trainer.compute_reference`).

Rows are matched by their video / media_path; videos without a row get one. The dataset file is
rewritten atomically and its previous version kept as `<name>.bak`. Replace `edges_of` to make
other kinds of references (depth, pose, ...).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import torch

from ltx_pipelines.io import MediaError, iter_video_frames, probe_video, write_video
from ltx_pipelines.io.progress import progress
from ltx_trainer.preprocessing.dataset_file import DatasetFileError, read_dataset, resolve_roles, write_records
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.media import DEFAULT_EXTENSIONS, find_media, is_image

logger = logging.getLogger(__name__)

REFERENCE_SUFFIX = "_reference"


def edges_of(frame: np.ndarray, low: int = 100, high: int = 200) -> np.ndarray:
    """(H, W, 3) uint8 RGB -> (H, W, 3) uint8 white edges on black (OpenCV Canny)."""
    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    edges = cv2.Canny(gray, low, high)
    return np.repeat(edges[:, :, None], 3, axis=2)


def reference_path(video: Path) -> Path:
    return video.with_name(f"{video.stem}{REFERENCE_SUFFIX}{video.suffix}")


def write_reference(video: Path, target: Path, *, batch_size: int = 100, overwrite: bool = False) -> Path:
    fps = probe_video(video).fps or 24.0

    def chunks() -> Iterator[torch.Tensor]:
        batch: list[np.ndarray] = []
        for frame in iter_video_frames(video):
            batch.append(edges_of(frame.numpy()))
            if len(batch) >= batch_size:
                yield torch.from_numpy(np.stack(batch))
                batch = []
        if batch:
            yield torch.from_numpy(np.stack(batch))

    write_video(target, chunks(), fps=fps, overwrite=overwrite)
    return target


def compute_references(
    input_path: str | Path, output: str | Path, *, override: bool = False, batch_size: int = 100
) -> RunReport:
    input_path, output = Path(input_path), Path(output)
    if batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1; got {batch_size}")
    rows: list[dict] = [dict(r.values) for r in read_dataset(output).rows] if output.exists() else []
    root = output.parent
    columns = list(dict.fromkeys(c for r in rows for c in r))
    video_col = resolve_roles(columns).get("video", "media_path")
    by_path = {str(r[video_col]).strip(): r for r in rows if r.get(video_col)}
    if input_path.resolve() == output.resolve():
        videos = [root / p for p in by_path]
    else:
        extensions = [e for e in DEFAULT_EXTENSIONS.split(",") if not is_image(Path("x." + e))]
        videos = [
            v for v in find_media(input_path, extensions, recursive=False) if not v.stem.endswith(REFERENCE_SUFFIX)
        ]
        for video in videos:
            key = _relative(video, root)
            if key not in by_path:
                row = {video_col: key}
                rows.append(row)
                by_path[key] = row
    if not videos:
        raise DatasetFileError(f"no videos to process in {str(input_path)!r}")
    report = RunReport()
    for video in progress(videos, desc="canny references", total=len(videos), unit="video"):
        key = _relative(video, root)
        target = reference_path(video)
        try:
            if target.exists() and not override:
                report.skip("reference")
            else:
                write_reference(video, target, batch_size=batch_size, overwrite=override)
                report.wrote("reference")
        except MediaError as e:
            report.drop("reference", key, str(e))
            continue
        by_path[key]["reference_video"] = _relative(target, root)
    if output.exists():
        shutil.copy2(output, output.with_name(output.name + ".bak"))
    write_records(output, rows, overwrite=True)
    return report


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())
