"""Cutting a long video into one clip per scene: PySceneDetect finds the cuts, PyAV re-encodes each scene.

Every scene is written as H.264 with the source's audio track as AAC, named `<stem>-Scene-001.mp4`, ...; no
external ffmpeg binary is needed. The command is `python -m ltx_trainer.split_scenes`.
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from ltx_pipelines.io import MediaError, iter_video_frames, probe_video, read_audio, write_video
from ltx_pipelines.io.progress import progress

logger = logging.getLogger(__name__)

DETECTORS = ("content", "adaptive", "threshold", "histogram")


@dataclass(frozen=True)
class Scene:
    """Frames [start, end) of the source video."""

    start: int
    end: int

    @property
    def frames(self) -> int:
        return self.end - self.start


def parse_length(value: str, fps: float) -> int:
    """'2s' / '2.5s' (seconds), '48' (frames) or '00:00:02.500' (timecode) -> frames at `fps`."""
    text = value.strip().lower()
    try:
        if text.endswith("s"):
            return round(float(text[:-1]) * fps)
        if re.fullmatch(r"\d+", text):
            return int(text)
        match = re.fullmatch(r"(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)", text)
        if match:
            hours, minutes, seconds = match.groups()
            return round((int(hours) * 3600 + int(minutes) * 60 + float(seconds)) * fps)
    except ValueError:
        pass
    raise ValueError(f"length {value!r} does not parse; expected seconds ('2s'), frames ('48') or HH:MM:SS.sss")


def _make_detector(kind: str, threshold: float | None, min_len: int, luma_only: bool, window: int, fade_bias: float):
    from scenedetect import AdaptiveDetector, ContentDetector, HistogramDetector, ThresholdDetector

    if kind == "content":
        extra = {} if threshold is None else {"threshold": threshold}
        return ContentDetector(min_scene_len=min_len, luma_only=luma_only, **extra)
    if kind == "adaptive":
        extra = {} if threshold is None else {"adaptive_threshold": threshold}
        return AdaptiveDetector(min_scene_len=min_len, luma_only=luma_only, window_width=window, **extra)
    if kind == "threshold":
        extra = {} if threshold is None else {"threshold": threshold}
        return ThresholdDetector(min_scene_len=min_len, fade_bias=fade_bias, add_final_scene=True, **extra)
    if kind == "histogram":
        extra = {} if threshold is None else {"threshold": threshold}
        return HistogramDetector(min_scene_len=min_len, **extra)
    raise ValueError(f"unknown detector {kind!r}; accepted: {', '.join(DETECTORS)}")


def detect_scenes(
    video: str | Path,
    *,
    detector: str = "content",
    threshold: float | None = None,
    min_scene_length: int = 15,
    luma_only: bool = False,
    adaptive_window: int = 2,
    fade_bias: float = 0.0,
    downscale: int | None = None,
    frame_skip: int = 0,
    stats_file: str | Path | None = None,
) -> list[Scene]:
    """Scenes of `video` in frames; a video without cuts is one scene."""
    from scenedetect import SceneManager, StatsManager, open_video

    if detector not in DETECTORS:
        raise ValueError(f"unknown detector {detector!r}; accepted: {', '.join(DETECTORS)}")
    total = probe_video(video).frames
    stream = open_video(str(video), backend="pyav")
    stats = StatsManager() if stats_file else None
    manager = SceneManager(stats_manager=stats)
    manager.add_detector(_make_detector(detector, threshold, min_scene_length, luma_only, adaptive_window, fade_bias))
    if downscale:
        manager.auto_downscale = False
        manager.downscale = downscale
    manager.detect_scenes(video=stream, frame_skip=frame_skip)
    found = [Scene(int(a.frame_num), int(b.frame_num)) for a, b in manager.get_scene_list(start_in_scene=True)]
    if stats is not None:
        stats.save_to_csv(str(stats_file))
    if not found:
        found = [Scene(0, total)]
    return found


def select_scenes(
    scenes: list[Scene],
    *,
    skip_start: int = 0,
    skip_end: int = 0,
    shorter_than: int = 0,
    max_scenes: int | None = None,
) -> list[Scene]:
    """Trim `skip_start` / `skip_end` frames off each scene (transition frames next to a cut), drop the
    scenes then shorter than `shorter_than` frames, keep at most `max_scenes`."""
    kept = []
    for scene in scenes:
        trimmed = Scene(scene.start + skip_start, scene.end - skip_end)
        if trimmed.frames >= max(1, shorter_than):
            kept.append(trimmed)
    return kept[:max_scenes] if max_scenes else kept


def write_scene(video: str | Path, scene: Scene, fps: float, target: Path, *, overwrite: bool = False) -> Path:
    """Re-encode frames [start, end) and the audio of the same span into `target` (mp4)."""
    frames = list(iter_video_frames(video, start_frame=scene.start, max_frames=scene.frames))
    if not frames:
        raise MediaError(f"no frames decoded for scene {scene} of {str(video)!r}")
    import torch

    audio = sample_rate = None
    if probe_video(video).has_audio:
        track = read_audio(video, start_time=scene.start / fps, max_duration=len(frames) / fps)
        audio, sample_rate = track.waveform, track.sample_rate
        if audio.shape[0] > 2:  # the writer takes mono or stereo; fold other layouts to stereo
            audio = torch.stack([audio[0::2].mean(0), audio[1::2].mean(0)])
    write_video(target, torch.stack(frames), fps=fps, audio=audio, audio_sample_rate=sample_rate, overwrite=overwrite)
    return target


def _save_images(video: Path, scenes: list[Scene], out: Path, count: int, stem: str) -> list[list[str]]:
    from PIL import Image

    names: list[list[str]] = []
    for number, scene in enumerate(scenes, start=1):
        picks = sorted({scene.start + round(i * (scene.frames - 1) / max(1, count - 1)) for i in range(count)})
        row = []
        for index in picks:
            frame = next(iter_video_frames(video, start_frame=index, max_frames=1))
            name = f"{stem}-Scene-{number:03d}-{index:06d}.jpg"
            Image.fromarray(frame.numpy()).save(out / name, quality=90)
            row.append(name)
        names.append(row)
    return names


def _write_report(out: Path, clips: list[Path], scenes: list[Scene], fps: float, images: list[list[str]]) -> None:
    rows = []
    for clip, scene, pics in zip(clips, scenes, images):
        thumbs = "".join(f'<img src="images/{html.escape(p)}" height="96">' for p in pics)
        rows.append(
            f"<tr><td>{html.escape(clip.name)}</td><td>{scene.start}</td><td>{scene.end}</td>"
            f"<td>{scene.frames / fps:.2f}</td><td>{thumbs}</td></tr>"
        )
    body = "".join(rows)
    (out / "scene_report.html").write_text(
        "<html><body><table border=1><tr><th>clip</th><th>start frame</th><th>end frame</th>"
        f"<th>seconds</th><th>frames</th></tr>{body}</table></body></html>\n",
        encoding="utf-8",
    )


def _write_scenes(video: Path, chosen: list[Scene], fps: float, out: Path, overwrite: bool) -> list[Path]:
    """`<stem>-Scene-NNN.mp4` per scene in `out`; an existing clip is kept unless `overwrite`."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for number, scene in progress(
        list(enumerate(chosen, start=1)), desc="write scenes", total=len(chosen), unit="scene"
    ):
        target = out / f"{video.stem}-Scene-{number:03d}.mp4"
        if target.exists() and not overwrite:
            logger.info("keeping existing %s (pass --overwrite to replace it)", target.name)
        else:
            write_scene(video, scene, fps, target, overwrite=overwrite)
        written.append(target)
    return written


def split_scenes(
    video: str | Path,
    output_dir: str | Path,
    *,
    detector: str = "content",
    threshold: float | None = None,
    min_scene_length: int = 15,
    filter_shorter_than: str | None = None,
    max_scenes: int | None = None,
    skip_start: int = 0,
    skip_end: int = 0,
    save_images: int = 0,
    stats_file: str | Path | None = None,
    luma_only: bool = False,
    adaptive_window: int = 2,
    fade_bias: float = 0.0,
    downscale: int | None = None,
    frame_skip: int = 0,
    overwrite: bool = False,
) -> list[Path]:
    video, out = Path(video), Path(output_dir)
    info = probe_video(video)  # raises MediaError for a missing or unreadable file, before any work
    fps = info.fps or 24.0
    shorter = parse_length(filter_shorter_than, fps) if filter_shorter_than else 0
    for name, value in (
        ("--min-scene-length", min_scene_length),
        ("--skip-start", skip_start),
        ("--skip-end", skip_end),
    ):
        if value < 0:
            raise ValueError(f"{name} must be >= 0; got {value}")
    scenes = detect_scenes(
        video,
        detector=detector,
        threshold=threshold,
        min_scene_length=min_scene_length,
        luma_only=luma_only,
        adaptive_window=adaptive_window,
        fade_bias=fade_bias,
        downscale=downscale,
        frame_skip=frame_skip,
        stats_file=stats_file,
    )
    chosen = select_scenes(
        scenes, skip_start=skip_start, skip_end=skip_end, shorter_than=shorter, max_scenes=max_scenes
    )
    logger.info("%s: %d scene(s) detected, %d kept", video.name, len(scenes), len(chosen))
    written = _write_scenes(video, chosen, fps, out, overwrite)
    if save_images > 0:
        (out / "images").mkdir(exist_ok=True)
        images = _save_images(video, chosen, out / "images", save_images, video.stem)
        _write_report(out, written, chosen, fps, images)
    return written
