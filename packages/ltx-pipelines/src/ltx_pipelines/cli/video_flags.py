"""The video flag group: output size, length, frame rate and image conditionings (`--height`, `--width`,
`--num-frames`, `--frame-rate`, `--image`). The audio-only pipeline takes the length flags alone."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace
from typing import Any

from PIL import Image, UnidentifiedImageError

from ltx_pipelines.cli.arg_types import ImageAction
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.cli.model_flags import RunModels
from ltx_pipelines.engine.defaults import PipelineDefaults, default_image_crf, spatial_multiple
from ltx_pipelines.engine.stages import ImageCondition

_MAX_CRF = 51


@dataclass(frozen=True)
class VideoChoice:
    num_frames: int
    frame_rate: float
    height: int | None = None
    width: int | None = None
    """None for the audio-only pipeline (no picture)."""
    images: tuple[ImageCondition, ...] = ()

    @property
    def seconds(self) -> float:
        return self.num_frames / self.frame_rate


@dataclass(frozen=True)
class VideoFlags(FlagGroup[VideoChoice]):
    """`two_stage`: sizes in multiples of 64 (stage 1 runs at half size). `picture=False`: only the length
    flags (the audio-only pipeline: `--num-frames` and `--frame-rate` give the duration)."""

    two_stage: bool = False
    picture: bool = True

    @property
    def multiple(self) -> int:
        return spatial_multiple(self.two_stage)

    def _size_defaults(self, defaults: PipelineDefaults) -> tuple[int, int]:
        if self.two_stage:
            return defaults.two_stage_height, defaults.two_stage_width
        return defaults.height, defaults.width

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        if not self.picture:
            group = parser.add_argument_group("duration")
            group.add_argument(
                "--num-frames",
                type=int,
                default=None,
                help=f"Duration in video frames (with --frame-rate), 8k+1 (default: {defaults.num_frames}).",
            )
            group.add_argument(
                "--frame-rate",
                type=float,
                default=None,
                help=f"Frame rate that turns --num-frames into seconds (default: {defaults.frame_rate:g}).",
            )
            return
        height, width = self._size_defaults(defaults)
        multiple = self.multiple
        group = parser.add_argument_group("video")
        group.add_argument(
            "--height",
            type=int,
            default=None,
            help=f"Video height in pixels, a multiple of {multiple} (default: {height}).",
        )
        group.add_argument(
            "--width",
            type=int,
            default=None,
            help=f"Video width in pixels, a multiple of {multiple} (default: {width}).",
        )
        group.add_argument(
            "--num-frames",
            type=int,
            default=None,
            help=f"Number of frames, 8k+1 (1, 9, ..., 121, ...) (default: {defaults.num_frames}).",
        )
        group.add_argument(
            "--frame-rate",
            type=float,
            default=None,
            help=f"Frames per second of the video, e.g. 24, 25, 30 or 23.976 (default: {defaults.frame_rate:g}).",
        )
        group.add_argument(
            "--image",
            dest="images",
            action=ImageAction,
            nargs="+",
            metavar="ARG",
            default=[],
            help=(
                "Condition on an image: PATH FRAME_IDX STRENGTH [CRF]; repeatable. FRAME_IDX is the output frame "
                "(0 = first), STRENGTH in [0, 1] (1 keeps the image), CRF in 0..51 the H.264 re-compression "
                "applied first (0 = none; default: the model generation's value, 33 up to LTX-2.3, 18 from 2.4). "
                "Example: --image first.jpg 0 1.0 --image last.png 120 0.8"
            ),
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> VideoChoice:
        defaults = context.defaults
        num_frames = defaults.num_frames if args.num_frames is None else args.num_frames
        if num_frames < 1 or (num_frames - 1) % 8:
            lower = max(1, (num_frames - 1) // 8 * 8 + 1)
            raise FlagError(
                f"--num-frames {num_frames} is not accepted: it must be 8k+1 (1, 9, 17, ..., 121, ...), "
                f"e.g. {lower} or {lower + 8}"
            )
        fps = defaults.frame_rate if args.frame_rate is None else args.frame_rate
        if not math.isfinite(fps) or fps <= 0:
            raise FlagError(f"--frame-rate {fps} is not accepted: it must be a positive number of frames per second")
        if not self.picture:
            return VideoChoice(num_frames=int(num_frames), frame_rate=float(fps))
        default_height, default_width = self._size_defaults(defaults)
        sizes = []
        for flag, given, default in (("--height", args.height, default_height), ("--width", args.width, default_width)):
            value = default if given is None else given
            multiple = self.multiple
            if value < multiple or value % multiple:
                raise FlagError(
                    f"{flag} {value} is not accepted: it must be a positive multiple of {multiple} "
                    f"(e.g. {max(multiple, value // multiple * multiple)} or {(value // multiple + 1) * multiple})"
                )
            sizes.append(int(value))
        images = tuple(_checked_image(image, num_frames) for image in args.images or [])
        return VideoChoice(
            num_frames=int(num_frames), frame_rate=float(fps), height=sizes[0], width=sizes[1], images=images
        )

    def settle(self, value: VideoChoice, models: RunModels, context: ReadContext) -> VideoChoice:
        """Images without a CRF take the checkpoint generation's (33 up to LTX-2.3, 18 from LTX-2.4)."""
        crf = default_image_crf(models.model_version)
        return replace(value, images=tuple(image.with_default_crf(crf) for image in value.images))

    def record(self, value: VideoChoice) -> dict[str, Any]:
        recorded: dict[str, Any] = {"num_frames": value.num_frames, "frame_rate": value.frame_rate}
        if self.picture:
            recorded.update(
                height=value.height,
                width=value.width,
                images=[
                    {"path": str(i.path), "frame_idx": i.frame_idx, "strength": i.strength, "crf": i.crf}
                    for i in value.images
                ],
            )
        return recorded


def _checked_image(image: ImageCondition, num_frames: int) -> ImageCondition:
    where = f"--image {str(image.path)!r}"
    if not image.path.is_file():
        raise FlagError(f"{where}: no such file" if not image.path.exists() else f"{where} is not a file")
    try:
        with Image.open(image.path) as im:
            im.size  # noqa: B018 - opening reads the header; a non-image raises here
    except (UnidentifiedImageError, OSError) as e:
        raise FlagError(f"{where} is not an image Pillow can read (PNG, JPEG, WebP, ...): {e}") from None
    if image.frame_idx < 0:
        raise FlagError(f"{where}: FRAME_IDX {image.frame_idx} must be >= 0")
    if image.frame_idx >= num_frames:
        raise FlagError(f"{where}: FRAME_IDX {image.frame_idx} is outside the video's frames 0..{num_frames - 1}")
    if not (math.isfinite(image.strength) and 0.0 <= image.strength <= 1.0):
        raise FlagError(f"{where}: STRENGTH {image.strength} must be in [0, 1]")
    if image.crf is not None and not 0 <= image.crf <= _MAX_CRF:
        raise FlagError(f"{where}: CRF {image.crf} must be in 0..{_MAX_CRF} (0 skips the re-compression)")
    return image
