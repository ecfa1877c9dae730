"""The `.precomputed/` folder: sub-folder names, per-sample file paths, and reading/writing sample files.

One safetensors file per sample and source, at the media path relative to the dataset folder with
the suffix replaced (`videos/a.mp4` -> `latents/videos/a.safetensors`). Tensors carry the data,
0-d tensors the scalar fields the reference stores beside them, and the string metadata records
provenance (source path, bucket, crop, scale factors). See docs/data.md for every field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_pipelines.io.atomic_files import apply_umask, atomic_output

FORMAT_VERSION = "1"
SAMPLE_SUFFIX = ".safetensors"
LEGACY_SUFFIX = ".pt"

LATENTS = "latents"
AUDIO_LATENTS = "audio_latents"
CONDITIONS = "conditions"
REFERENCE_LATENTS = "reference_latents"
REFERENCE_AUDIO_LATENTS = "reference_audio_latents"
VIDEO_MASKS = "video_masks"
AUDIO_MASKS = "audio_masks"
DECODED_VIDEOS = "decoded_videos"
DECODED_REFERENCE_VIDEOS = "decoded_reference_videos"
DECODED_AUDIO = "decoded_audio"
MANIFEST = "preprocessing.json"
"""Run parameters of the last process_dataset run (model, buckets, trigger, reference factors)."""

HAS_AUDIO = "has_audio"
"""0-d bool in an `audio_latents/` file: False for a clip without an audio track (silence stands in, and
training masks the sample's audio loss). Files without it have audio."""

SOURCES = (LATENTS, AUDIO_LATENTS, CONDITIONS, REFERENCE_LATENTS, REFERENCE_AUDIO_LATENTS, VIDEO_MASKS, AUDIO_MASKS)


class DataFileError(ValueError):
    """A sample file that cannot be read, or lacks a tensor its reader needs: the message names the file.
    Built with `about`; the one-message constructor lets a DataLoader worker's error be raised again."""

    @classmethod
    def about(cls, path: Path, problem: str) -> DataFileError:
        return cls(
            f"{str(path)!r}: {problem}; delete it and re-run process_dataset (it recomputes only missing files), "
            "or remove that row from the dataset"
        )


def sample_path(root: str | Path, source: str, key: Path) -> Path:
    """`<root>/<source>/<key with .safetensors>` for the sample named `key` (a relative media path)."""
    return Path(root) / source / key.with_suffix(SAMPLE_SUFFIX)


@dataclass(frozen=True)
class SampleFile:
    tensors: dict[str, torch.Tensor]
    metadata: dict[str, str]

    def scalar(self, name: str) -> float:
        return float(self.tensors[name].item())

    def meta_json(self, name: str, default: Any = None) -> Any:
        value = self.metadata.get(name)
        return default if value is None else json.loads(value)


def save_sample(
    path: str | Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, Any] | None = None
) -> Path:
    """Write one sample file atomically (ltx_pipelines' `atomic_output`: a hidden temporary file in the
    same folder, renamed when complete), so an interrupted run leaves nothing that loaders or the
    skip-existing check mistake for a finished sample. Replaces an existing file: callers decide
    about overwriting before doing the work."""
    target = Path(path)
    meta = {"format_version": FORMAT_VERSION}
    for key, value in (metadata or {}).items():
        meta[key] = value if isinstance(value, str) else json.dumps(value)
    with atomic_output(target, overwrite=True) as tmp:
        save_file({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}, str(tmp), metadata=meta)
        apply_umask(tmp)  # safetensors recreates the file private (0600)
    return target


def load_sample(path: str | Path) -> SampleFile:
    """Read a sample file: our safetensors layout, or the reference's `.pt` dicts (loaded with
    `weights_only=True`; scalar fields become 0-d tensors). A file that cannot be read (truncated, zeroed,
    not a sample) raises `DataFileError` naming it."""
    p = Path(path)
    try:
        return _read_sample(p)
    except DataFileError:
        raise
    except OSError as exc:
        if not p.is_file():
            raise
        raise DataFileError.about(p, f"not a readable sample file ({exc})") from None
    except Exception as exc:  # safetensors and torch raise many types for damaged files
        lines = str(exc).strip().splitlines()
        reason = lines[-1] if lines else type(exc).__name__
        raise DataFileError.about(p, f"not a readable sample file ({reason})") from None


def require_tensors(path: Path, sample: SampleFile, names: tuple[str, ...] | list[str]) -> None:
    """Raise `DataFileError` unless `sample` (read from `path`) holds every tensor in `names`."""
    missing = [name for name in names if name not in sample.tensors]
    if missing:
        raise DataFileError.about(path, f"lacks the tensor(s) {missing} (has {sorted(sample.tensors)})")


def _read_sample(p: Path) -> SampleFile:
    if p.suffix == LEGACY_SUFFIX:
        data = torch.load(p, map_location="cpu", weights_only=True)
        if not isinstance(data, dict):
            raise DataFileError.about(p, "does not hold a dict of tensors (the reference's .pt sample layout)")
        tensors = {k: v if isinstance(v, torch.Tensor) else torch.tensor(v) for k, v in data.items()}
        return SampleFile(tensors=tensors, metadata={"format_version": "reference-pt"})
    with safe_open(str(p), framework="pt", device="cpu") as f:
        metadata = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not a mapping
    return SampleFile(tensors=tensors, metadata=metadata)


def find_samples(folder: str | Path) -> list[Path]:
    """Finished sample files under `folder` (safetensors and legacy .pt), sorted; partial files excluded."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = [p for p in root.rglob("*") if p.is_file() and p.suffix in (SAMPLE_SUFFIX, LEGACY_SUFFIX)]
    return sorted(p for p in found if not p.name.startswith("."))


def video_latent_tensors(latents: torch.Tensor, fps: float) -> dict[str, torch.Tensor]:
    """The tensors of a `latents/` or `reference_latents/` file: latents (C, F', H', W') and its grid."""
    if latents.ndim != 4:
        raise ValueError(f"video latents must be (C, F', H', W'); got {tuple(latents.shape)}")
    _, frames, height, width = latents.shape
    return {
        "latents": latents,
        "num_frames": torch.tensor(frames, dtype=torch.int64),
        "height": torch.tensor(height, dtype=torch.int64),
        "width": torch.tensor(width, dtype=torch.int64),
        "fps": torch.tensor(fps, dtype=torch.float32),
    }


def audio_latent_tensors(latents: torch.Tensor, duration: float) -> dict[str, torch.Tensor]:
    """The tensors of an `audio_latents/` file: latents (C, T, bins) and its time/frequency sizes."""
    if latents.ndim != 3:
        raise ValueError(f"audio latents must be (C, T, mel_bins); got {tuple(latents.shape)}")
    return {
        "latents": latents,
        "num_time_steps": torch.tensor(latents.shape[1], dtype=torch.int64),
        "frequency_bins": torch.tensor(latents.shape[2], dtype=torch.int64),
        "duration": torch.tensor(duration, dtype=torch.float32),
    }


def write_manifest(root: str | Path, params: Mapping[str, Any]) -> Path:
    """Record the run parameters in `<root>/preprocessing.json` (atomically)."""
    target = Path(root) / MANIFEST
    text = json.dumps(dict(params), indent=2, sort_keys=True, default=str) + "\n"
    with atomic_output(target, overwrite=True) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def read_manifest(root: str | Path) -> dict[str, Any] | None:
    path = Path(root) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
