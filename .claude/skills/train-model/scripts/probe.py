"""Print the facts phase 2 of the train-model skill needs, with PyAV and torch only.

Usage: python .claude/skills/train-model/scripts/probe.py MEDIA [MEDIA ...] [--run RUN] [--max-frames N]
MEDIA are clip files or folders (searched recursively). Prints, one fact per line: the clips by
extension, the shortest clip, the frame count every clip reaches (largest 8k+1, capped at
--max-frames), each resolution with its orientation and clips, the buckets that fit those orientations
(the default of phase 3), the clips without an audio track, the CUDA devices (torch) and the free disk
space.
`ffprobe` and `nvidia-smi` are not needed; where they exist they only add detail.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v")
DEFAULT_MAX_FRAMES = 49  # the skill's default bucket (960x544x49); the probe only ever lowers it
# One bucket size per orientation, all near the default's area (960x544, multiples of 32): the trainer puts
# each clip in the bucket of the closest aspect ratio, so a portrait clip only keeps its framing when a
# portrait bucket exists (else it is centre-cropped to a landscape strip).
ORIENTATION_SIZES = {"landscape": (960, 544), "portrait": (544, 960), "square": (704, 704)}
NAMES_SHOWN = 5


@dataclass(frozen=True)
class Clip:
    path: Path
    frames: int
    fps: float
    has_audio: bool
    width: int
    height: int

    @property
    def seconds(self) -> float:
        return self.frames / self.fps if self.fps > 0 else 0.0

    @property
    def orientation(self) -> str:
        if self.width == self.height:
            return "square"
        return "landscape" if self.width > self.height else "portrait"


def largest_frame_count(frames: int, cap: int | None = None) -> int:
    """The largest 8k+1 that is at most `frames` (and `cap`); 0 when not even one frame is there."""
    limit = min(frames, cap) if cap is not None else frames
    return 0 if limit < 1 else (limit - 1) // 8 * 8 + 1


def find_clips(paths: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file())
        elif path.exists():
            found.append(path)
    return found


def probe_clips(paths: Sequence[Path]) -> tuple[list[Clip], list[tuple[Path, str]]]:
    """(readable clips, (unreadable path, reason)); symlinks are followed for reading only."""
    from ltx_pipelines.io import MediaError
    from ltx_trainer.preprocessing.media import probe_media

    clips: list[Clip] = []
    unreadable: list[tuple[Path, str]] = []
    for path in paths:
        try:
            info = probe_media(path)
        except (MediaError, OSError) as exc:
            unreadable.append((path, str(exc)))
            continue
        clips.append(Clip(path, info.frames, info.fps, info.has_audio, info.width, info.height))
    return clips, unreadable


def gpu_lines() -> list[str]:
    try:
        import torch
    except ImportError:
        return ["gpu: unknown (torch does not import)"]
    if not torch.cuda.is_available():
        return ["gpu: none (CUDA is not available to torch)"]
    lines = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        lines.append(
            f"gpu {i}: {torch.cuda.get_device_name(i)}, {total / 2**30:.1f} GiB total, {free / 2**30:.1f} GiB free"
        )
    return lines


def _names(clips: Sequence[Clip]) -> str:
    names = [c.path.name for c in clips[:NAMES_SHOWN]]
    more = len(clips) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


def resolution_lines(clips: Sequence[Clip], frames: int) -> list[str]:
    """One line per resolution (with its orientation and clips), then the buckets that fit the orientations
    found: one per orientation, so that no clip is cropped into a bucket of another orientation."""
    by_size: dict[tuple[int, int], list[Clip]] = {}
    for clip in clips:
        by_size.setdefault((clip.width, clip.height), []).append(clip)
    lines = [
        f"resolution: {w}x{h} {group[0].orientation}, {len(group)} clip{'s' * (len(group) > 1)}: {_names(group)}"
        for (w, h), group in sorted(by_size.items(), key=lambda item: -len(item[1]))
    ]
    counts = Counter(c.orientation for c in clips)
    order = [o for o in ORIENTATION_SIZES if counts[o]]
    buckets = ";".join(f"{ORIENTATION_SIZES[o][0]}x{ORIENTATION_SIZES[o][1]}x{frames}" for o in order)
    which = ", ".join(f"{o} {counts[o]}" for o in order)
    note = "; several buckets need optimization.batch_size 1" if len(order) > 1 else ""
    # `;`-separated: the line's first word is the --resolution-buckets value as is.
    lines.append(f"buckets: {buckets} (one per orientation: {which}{note})")
    return lines


def report(clips: list[Clip], unreadable: list[tuple[Path, str]], run: Path | None, max_frames: int) -> list[str]:
    lines = []
    by_suffix = Counter(c.path.suffix.lower() for c in clips)
    kinds = ", ".join(f"{s}: {n}" for s, n in sorted(by_suffix.items())) or "none"
    lines.append(f"clips: {len(clips)} ({kinds})")
    for path, reason in unreadable:
        lines.append(f"unreadable: {path} ({reason})")
    if clips:
        shortest = min(clips, key=lambda c: c.frames)
        lines.append(
            f"shortest clip: {shortest.path.name} {shortest.seconds:.2f} s, {shortest.frames} frames at "
            f"{shortest.fps:.2f} fps"
        )
        reach = largest_frame_count(shortest.frames)
        lines.append(
            f"frame count: {largest_frame_count(shortest.frames, max_frames)} (largest 8k+1 every clip reaches "
            f"is {reach}; at most {max_frames})"
        )
        lines += resolution_lines(clips, largest_frame_count(shortest.frames, max_frames))
        silent = [c.path.name for c in clips if not c.has_audio]
        lines.append(
            f"audio: {len(clips) - len(silent)} of {len(clips)} clips have an audio track"
            + (f"; without: {', '.join(silent)}" if silent else "")
        )
    lines += gpu_lines()
    where = run if run is not None else Path.cwd()
    while not where.exists():
        where = where.parent
    lines.append(f"disk: {shutil.disk_usage(where).free / 2**30:.1f} GiB free at {where}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="probe.py", description=__doc__.splitlines()[0])
    parser.add_argument("media", type=Path, nargs="+", help="clip files or folders")
    parser.add_argument("--run", type=Path, default=None, help="the run folder (for the free disk space)")
    parser.add_argument(
        "--max-frames", type=int, default=DEFAULT_MAX_FRAMES, help=f"frame count cap (default {DEFAULT_MAX_FRAMES})"
    )
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.media if not p.exists()]
    if missing:
        parser.error(f"not found: {', '.join(missing)}")
    if largest_frame_count(args.max_frames) < 1:
        parser.error(f"--max-frames {args.max_frames}: must be at least 1")
    clips, unreadable = probe_clips(find_clips(args.media))
    print("\n".join(report(clips, unreadable, args.run, args.max_frames)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
