"""Resolution buckets `WxHxF`: parsing, choosing one per clip, scaling for reference videos."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SPATIAL_MULTIPLE = 32
TEMPORAL_MULTIPLE = 8


class BucketError(ValueError):
    """A bucket specification that does not parse or does not fit the VAE's geometry."""


@dataclass(frozen=True, order=True)
class Bucket:
    width: int
    height: int
    frames: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height}x{self.frames}"

    @property
    def aspect_ratio(self) -> float:
        return self.width / self.height

    @property
    def area(self) -> int:
        return self.width * self.height

    @property
    def latent_fhw(self) -> tuple[int, int, int]:
        return (
            (self.frames - 1) // TEMPORAL_MULTIPLE + 1,
            self.height // SPATIAL_MULTIPLE,
            self.width // SPATIAL_MULTIPLE,
        )

    def check(self) -> Bucket:
        for name, value in (("width", self.width), ("height", self.height)):
            if value < SPATIAL_MULTIPLE or value % SPATIAL_MULTIPLE:
                raise BucketError(f"bucket {self}: {name} {value} must be a positive multiple of {SPATIAL_MULTIPLE}")
        if self.frames < 1 or (self.frames - 1) % TEMPORAL_MULTIPLE:
            raise BucketError(f"bucket {self}: frames {self.frames} must be 8k+1 (1, 9, 17, 25, 33, 41, 49, ...)")
        return self


def parse_buckets(spec: str) -> list[Bucket]:
    """'768x448x89;512x512x49' -> buckets (W, H, F); raises BucketError naming the bad entry."""
    if not spec or not spec.strip():
        raise BucketError("no resolution buckets given; expected 'WxHxF' entries separated by ';', e.g. 768x448x89")
    buckets: list[Bucket] = []
    for entry in spec.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        parts = entry.lower().split("x")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise BucketError(
                f"resolution bucket {entry!r} does not parse; expected WxHxF with integers, e.g. 768x448x89"
            )
        bucket = Bucket(*(int(p) for p in parts)).check()
        if bucket not in buckets:
            buckets.append(bucket)
    if not buckets:
        raise BucketError(f"no resolution buckets in {spec!r}; expected e.g. 768x448x89")
    return buckets


def choose_bucket(
    buckets: Sequence[Bucket], width: int, height: int, frames: int, *, is_image: bool = False
) -> Bucket | None:
    """The bucket for a clip of `width` x `height` with `frames` usable frames, or None when the clip is
    shorter than every bucket.

    Images go to 1-frame buckets; videos to multi-frame buckets whenever there are any (so a clip
    too short for them is dropped, not silently turned into a still). Among the buckets with at most
    `frames` frames: the closest aspect ratio (in log space, so 2:1 and 1:2 are equally far from
    1:1), then the most frames, then the largest area.
    """
    if is_image:
        candidates = [b for b in buckets if b.frames == 1]
    else:
        candidates = [b for b in buckets if b.frames > 1] or list(buckets)
    fitting = [b for b in candidates if b.frames <= frames]
    if not fitting:
        return None
    log_ar = math.log(width / height)
    return min(fitting, key=lambda b: (round(abs(math.log(b.aspect_ratio) - log_ar), 9), -b.frames, -b.area))


def reference_bucket(target: Bucket, downscale: int, temporal_scale: int) -> Bucket:
    """The reference video's size for a target bucket: space divided by `downscale`, time subsampled
    by `temporal_scale` keeping frame 0 (F_ref = (F - 1) / S + 1); must still fit the VAE grid."""
    if downscale < 1 or temporal_scale < 1:
        raise BucketError(f"reference scale factors must be >= 1; got {downscale} and {temporal_scale}")
    if target.width % downscale or target.height % downscale:
        raise BucketError(f"bucket {target} cannot be divided by --reference-downscale-factor {downscale}")
    if (target.frames - 1) % temporal_scale:
        raise BucketError(
            f"bucket {target}: {target.frames - 1} frames after the first are not divisible by "
            f"--reference-temporal-scale-factor {temporal_scale}"
        )
    scaled = Bucket(target.width // downscale, target.height // downscale, (target.frames - 1) // temporal_scale + 1)
    try:
        return scaled.check()
    except BucketError as e:
        raise BucketError(
            f"reference bucket for {target} with downscale {downscale} and temporal scale {temporal_scale} "
            f"is {scaled}, which does not fit the VAE: {e}"
        ) from None


def parse_durations(spec: str) -> list[float]:
    """'2;4;8' -> [2.0, 4.0, 8.0] (seconds, positive, sorted)."""
    values: list[float] = []
    for entry in spec.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        try:
            value = float(entry.rstrip("s"))
        except ValueError:
            raise BucketError(f"audio duration {entry!r} does not parse; expected seconds like '2;4;8'") from None
        if not value > 0:
            raise BucketError(f"audio duration {entry!r} must be positive")
        values.append(value)
    if not values:
        raise BucketError(f"no audio durations in {spec!r}; expected seconds like '2;4;8'")
    return sorted(set(values))


def choose_duration(durations: Sequence[float], clip_seconds: float) -> float | None:
    """The longest duration bucket that the clip covers, or None when it is shorter than all of them."""
    fitting = [d for d in durations if d <= clip_seconds + 1e-6]
    return max(fitting) if fitting else None
