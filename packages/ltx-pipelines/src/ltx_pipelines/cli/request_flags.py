"""The flag groups of what a run asks for. The prompt group: `--prompt`, `--seed`, `--enhance-prompt` and
`--prompt-enhancer-gemma-root`.

The video group: output size, length, frame rate and image conditionings (`--height`, `--width`,
`--num-frames`, `--frame-rate`, `--image`). The audio-only pipeline takes the length flags alone.

Pipelines that can predict the length from the prompt (`auto_duration`) add `--auto-duration MIN MAX`: the
LTX-2.5 duration head picks the frame count in that range, as it does in its default range when
`--num-frames` is omitted on model files with a duration head (the LTX-2.5 demo's included).

`--num-generated-keyframes N`: N evenly spaced interior keyframe slots in stage 1 (0, the default: off).

Only the pipelines that hand it to their first stage add the group (distilled, the text/image-to-video ones and
their `*_mgpu` twins), so no command parses the flag and ignores it. The count is checked against the clip's
interior frames as soon as the flags are read, and the transformer's keyframe embedding once the model files
are known, both before anything loads.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.arg_types import ImageAction
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.engine.model_versions import (
    ONE_STAGE_SPATIAL_MULTIPLE,
    TWO_STAGE_SPATIAL_MULTIPLE,
    default_image_crf,
)

if TYPE_CHECKING:
    from ltx_core.model.duration_head import DurationRange
    from ltx_pipelines.cli.model_resolution import RunModels
    from ltx_pipelines.engine.denoising_stage import ImageCondition
    from ltx_pipelines.engine.model_versions import PipelineDefaults


_SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


@dataclass(frozen=True)
class PromptChoice:
    text: str
    seed: int
    enhance: bool
    enhancer: str | Path | None = None
    """The separate enhancer Gemma (`--prompt-enhancer-gemma-root`): a local path, or hf:// until settled."""


class PromptFlags(FlagGroup[PromptChoice]):
    sections = (
        FlagSection(
            "prompt",
            (
                Flag(
                    "--prompt",
                    {"type": str, "required": True, "help": "Text describing the video (and audio) to generate."},
                ),
                Flag("--seed", {"type": int, "help": "Random seed; the same seed gives the same result"}, "{seed}"),
                Flag(
                    "--enhance-prompt",
                    {
                        "action": "store_true",
                        "help": "Rewrite the prompt with the Gemma model into a detailed description before "
                        "encoding it.",
                    },
                ),
                Flag(
                    "--prompt-enhancer-gemma-root",
                    {
                        "default": None,
                        "metavar": "PATH",
                        "help": "With --enhance-prompt: another Gemma that rewrites the prompt (a Gemma folder or a "
                        "packed Gemma 4 file, e.g. a dense Gemma 4 instruction model; greedy for Gemma 4), a path or "
                        "hf://; default: the text encoder rewrites it.",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[PromptChoice]:
        from ltx_pipelines.cli.model_resolution import is_hf_path

        seed = context.defaults.seed if args.seed is None else args.seed
        if not _SEED_RANGE[0] <= seed <= _SEED_RANGE[1]:
            raise FlagError(f"--seed {seed} is out of range [{_SEED_RANGE[0]}, {_SEED_RANGE[1]}]")
        if not args.prompt.strip():
            raise FlagError("--prompt is empty; describe the video to generate")
        enhancer = args.prompt_enhancer_gemma_root
        if enhancer is not None:
            if not args.enhance_prompt:
                raise FlagError("--prompt-enhancer-gemma-root only rewrites prompts with --enhance-prompt; add it")
            if not is_hf_path(enhancer):
                enhancer = Path(enhancer).expanduser().absolute()
                if not enhancer.exists():
                    raise FlagError(
                        f"--prompt-enhancer-gemma-root {str(enhancer)!r} does not exist (a Gemma folder or a packed "
                        "Gemma 4 .safetensors file)"
                    )
        value = PromptChoice(text=args.prompt, seed=int(seed), enhance=bool(args.enhance_prompt), enhancer=enhancer)
        # An hf:// enhancer is fetched once the model files are resolved.
        return self._reading(value, settle=enhancer is not None and not isinstance(enhancer, Path))

    def settle(self, value: PromptChoice, models: RunModels, context: ReadContext) -> Reading[PromptChoice]:
        from ltx_pipelines.cli.model_resolution import HfPathError, resolve_model_path

        is_file = str(value.enhancer).endswith(".safetensors")
        try:
            return self._reading(replace(value, enhancer=resolve_model_path(value.enhancer, folder=not is_file)))
        except HfPathError as e:
            raise FlagError(f"--prompt-enhancer-gemma-root: {e}") from None

    def _reading(self, value: PromptChoice, *, settle: bool = False) -> Reading[PromptChoice]:
        enhancer = None if value.enhancer is None else str(value.enhancer)
        return Reading(
            value,
            record={
                "prompt": value.text,
                "seed": value.seed,
                "enhance_prompt": value.enhance,
                "prompt_enhancer_gemma_root": enhancer,
            },
            pipeline_options={} if value.enhancer is None else {"prompt_enhancer_gemma_root": value.enhancer},
            call_arguments={"seed": value.seed, "enhance_prompt": value.enhance},
            memory_inputs={"enhance": value.enhance},
            settle=settle,
        )


_MAX_CRF = 51


@dataclass(frozen=True)
class VideoChoice:
    num_frames: int
    frame_rate: float
    height: int | None = None
    width: int | None = None
    """None for the audio-only pipeline (no picture)."""
    images: tuple[ImageCondition, ...] = ()
    duration: DurationRange | None = None
    """The seconds the duration head's prediction is clamped to, when it picks the length; `num_frames` is
    then the longest length of that range (what the memory check plans for)."""
    frames_given: bool = True
    """Whether `--num-frames` was given (else it is the model version's default, or the range's longest)."""

    @property
    def seconds(self) -> float:
        return self.num_frames / self.frame_rate


@dataclass(frozen=True)
class VideoFlags(FlagGroup[VideoChoice]):
    """`two_stage`: sizes in multiples of 64 (stage 1 runs at half size). `picture=False`: only the length
    flags (the audio-only pipeline: `--num-frames` and `--frame-rate` give the duration)."""

    two_stage: bool = False
    picture: bool = True
    auto_duration: bool = False
    """`--auto-duration`, and a predicted length when `--num-frames` is omitted on model files with a head."""
    multiple: int = field(init=False)
    """What height and width must be multiples of (set from `two_stage`)."""
    sections: tuple[FlagSection, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        multiple = TWO_STAGE_SPATIAL_MULTIPLE if self.two_stage else ONE_STAGE_SPATIAL_MULTIPLE
        object.__setattr__(self, "multiple", multiple)
        object.__setattr__(self, "sections", (self._section(),))

    def _size_defaults(self, defaults: PipelineDefaults) -> tuple[int, int]:
        if self.two_stage:
            return defaults.two_stage_height, defaults.two_stage_width
        return defaults.height, defaults.width

    def _section(self) -> FlagSection:
        rate = "{frame_rate:g}"
        if not self.picture:
            return FlagSection(
                "duration",
                (
                    Flag(
                        "--num-frames",
                        {"type": int, "help": "Duration in video frames (with --frame-rate), 8k+1"},
                        "{num_frames}",
                    ),
                    Flag(
                        "--frame-rate", {"type": float, "help": "Frame rate that turns --num-frames into seconds"}, rate
                    ),
                ),
            )
        sizes = ("{two_stage_height}", "{two_stage_width}") if self.two_stage else ("{height}", "{width}")
        picked = " or, on model files with a duration head, picked from the prompt" if self.auto_duration else ""
        flags = (
            *size_flags(self.multiple, sizes, noun="Video {} in pixels"),
            Flag(
                "--num-frames",
                {"type": int, "help": "Number of frames, 8k+1 (1, 9, ..., 121, ...)"},
                "{num_frames}" + picked,
            ),
            Flag(
                "--frame-rate",
                {"type": float, "help": "Frames per second of the video, e.g. 24, 25, 30 or 23.976"},
                rate,
            ),
            *((_auto_duration_flag(),) if self.auto_duration else ()),
            Flag(
                "--image",
                {
                    "dest": "images",
                    "action": ImageAction,
                    "nargs": "+",
                    "metavar": "ARG",
                    "default": [],
                    "help": (
                        "Condition on an image: PATH FRAME_IDX STRENGTH [CRF]; repeatable. FRAME_IDX is the output "
                        "frame (0 = first), STRENGTH in [0, 1] (1 keeps the image), CRF in 0..51 the H.264 "
                        "re-compression applied first (0 = none; default: the model version's value, 33 up to "
                        "LTX-2.3, 18 from 2.4). Example: --image first.jpg 0 1.0 --image last.png 120 0.8"
                    ),
                },
            ),
        )
        return FlagSection("video", flags)

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[VideoChoice]:
        defaults = context.defaults
        fps = defaults.frame_rate if args.frame_rate is None else args.frame_rate
        duration = self._duration(args)
        num_frames = defaults.num_frames if args.num_frames is None else args.num_frames
        if duration is not None and math.isfinite(fps) and fps > 0:
            num_frames = _longest(duration, fps)
        if num_frames < 1 or (num_frames - 1) % 8:
            lower = max(1, (num_frames - 1) // 8 * 8 + 1)
            raise FlagError(
                f"--num-frames {num_frames} is not accepted: it must be 8k+1 (1, 9, 17, ..., 121, ...), "
                f"e.g. {lower} or {lower + 8}"
            )
        if not math.isfinite(fps) or fps <= 0:
            raise FlagError(f"--frame-rate {fps} is not accepted: it must be a positive number of frames per second")
        frames_given = args.num_frames is not None
        if not self.picture:
            return self._reading(
                VideoChoice(num_frames=int(num_frames), frame_rate=float(fps), frames_given=frames_given)
            )
        sizes = checked_size(args, self.multiple, self._size_defaults(defaults))
        images = tuple(_checked_image(image, num_frames) for image in args.images or [])
        value = VideoChoice(
            num_frames=int(num_frames),
            frame_rate=float(fps),
            height=sizes[0],
            width=sizes[1],
            images=images,
            duration=duration,
            frames_given=frames_given,
        )
        # The model files give the images' CRF and, without --num-frames, the duration head the length.
        return self._reading(value, settle=bool(images) or (self.auto_duration and not frames_given))

    def _duration(self, args: argparse.Namespace) -> DurationRange | None:
        from ltx_core.model.duration_head import DurationRange

        given = getattr(args, "auto_duration", None) if self.auto_duration else None
        if given is None:
            return None
        if args.num_frames is not None:
            raise FlagError(
                f"--num-frames {args.num_frames} and --auto-duration {given[0]:g} {given[1]:g} were both given: "
                "pass a frame count or a range for the duration head, not both"
            )
        low, high = given
        if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
            raise FlagError(
                f"--auto-duration {low:g} {high:g} is not accepted: it must be MIN_SECONDS MAX_SECONDS "
                "with 0 < MIN_SECONDS <= MAX_SECONDS"
            )
        return DurationRange(low, high)

    def settle(self, value: VideoChoice, models: RunModels, context: ReadContext) -> Reading[VideoChoice]:
        """Images without a CRF take the model version's (33 up to LTX-2.3, 18 from LTX-2.4). The
        length: predicted by the duration head when asked (or when `--num-frames` is omitted on files with a
        head); refused before loading when the files have no head to predict with."""
        from ltx_core.model.duration_head import DurationRange
        from ltx_pipelines.engine.prompt_pipeline import check_duration_range, has_duration_head

        crf = default_image_crf(models.model_version)
        value = replace(value, images=tuple(image.with_default_crf(crf) for image in value.images))
        if not self.auto_duration or value.frames_given:
            return self._reading(value)
        head = has_duration_head(models.checkpoint)
        if value.duration is not None:
            if not head:
                raise FlagError(
                    "--auto-duration needs a duration head, which the model files do not have: pass "
                    "--duration-head-path (e.g. ltx-2.5-duration-head-bf16.safetensors), or --num-frames instead"
                )
            try:
                check_duration_range(value.duration, models.transformer_config)
            except ValueError as e:
                low, high = value.duration.min_seconds, value.duration.max_seconds
                raise FlagError(f"--auto-duration {low:g} {high:g} is not accepted: {e}") from None
            return self._reading(value)
        if head:
            duration = DurationRange()
            return self._reading(replace(value, duration=duration, num_frames=_longest(duration, value.frame_rate)))
        if models.model_version >= LTX_2_5:
            raise FlagError(
                "--num-frames is needed: the model files have no duration head to predict the length from the "
                "prompt (pass --num-frames, or the duration head with --duration-head-path)"
            )
        return self._reading(value)

    def _reading(self, value: VideoChoice, *, settle: bool = False) -> Reading[VideoChoice]:
        return Reading(
            value,
            record=self._record(value),
            call_arguments=self._call_arguments(value),
            # A predicted length is planned at the range's longest (`num_frames` holds it).
            memory_inputs={
                "height": value.height,
                "width": value.width,
                "num_frames": value.num_frames,
                "frame_rate": value.frame_rate,
                "images": bool(value.images),
            },
            settle=settle,
        )

    def _record(self, value: VideoChoice) -> dict[str, Any]:
        recorded: dict[str, Any] = {"num_frames": value.num_frames, "frame_rate": value.frame_rate}
        if self.auto_duration:
            duration = value.duration
            recorded["auto_duration"] = None if duration is None else [duration.min_seconds, duration.max_seconds]
            if duration is not None:
                recorded["num_frames"] = None  # predicted during the run; the sidecar records the result
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

    def _call_arguments(self, value: VideoChoice) -> dict[str, Any]:
        # The one place this group's value becomes the pipelines' call (a `VideoRequest` once they take one).
        arguments: dict[str, Any] = {"num_frames": value.num_frames, "frame_rate": value.frame_rate}
        if self.picture:
            arguments.update(height=value.height, width=value.width, images=value.images)
        if self.auto_duration:
            arguments["duration"] = value.duration
            if value.duration is not None:  # the duration head picks the length
                arguments["num_frames"] = None
        return arguments


LTX_2_5 = (2, 5)


def size_flags(multiple: int, shown: tuple[str, str], *, noun: str) -> tuple[Flag, Flag]:
    """`--height` and `--width`, each a multiple of `multiple`, defaulting to the run's (`shown`: the
    `PipelineDefaults` fields of height and width, as `Flag.shown`); `noun` names the dimension in the help (`{}`:
    height or width)."""
    return tuple(
        Flag(f"--{name}", {"type": int, "help": f"{noun.format(name)}, a multiple of {multiple}"}, default)
        for name, default in zip(("height", "width"), shown)
    )  # type: ignore[return-value]


def checked_size(args: argparse.Namespace, multiple: int, defaults: tuple[int, int]) -> tuple[int, int]:
    """(height, width) as typed, else the run's `defaults`: each a positive multiple of `multiple` (the error names
    the flag, the value and the nearest accepted ones)."""
    sizes = []
    for flag, given, default in (("--height", args.height, defaults[0]), ("--width", args.width, defaults[1])):
        value = default if given is None else given
        if value < multiple or value % multiple:
            raise FlagError(
                f"{flag} {value} is not accepted: it must be a positive multiple of {multiple} "
                f"(e.g. {max(multiple, value // multiple * multiple)} or {(value // multiple + 1) * multiple})"
            )
        sizes.append(int(value))
    return sizes[0], sizes[1]


def _auto_duration_flag() -> Flag:
    from ltx_core.model.duration_head import DurationRange

    default = DurationRange()
    return Flag(
        "--auto-duration",
        {
            "type": float,
            "nargs": 2,
            "metavar": ("MIN_SECONDS", "MAX_SECONDS"),
            "default": None,
            "help": "Let the duration head (LTX-2.5, --duration-head-path) pick the length from the prompt, in "
            f"[MIN_SECONDS, MAX_SECONDS]. With model files that have a head, omitting --num-frames does this in "
            f"[{default.min_seconds:g}, {default.max_seconds:g}] s. Not with --num-frames.",
        },
    )


def _longest(duration: DurationRange, frame_rate: float) -> int:
    """The longest frame count a prediction in `duration` can give at `frame_rate`."""
    from ltx_core.model.duration_head import frames_for_seconds

    most = max(1, round(duration.max_seconds * frame_rate))
    return frames_for_seconds(duration.max_seconds, frame_rate=frame_rate, min_frames=1, max_frames=most)


def _checked_image(image: ImageCondition, num_frames: int) -> ImageCondition:
    from PIL import Image, UnidentifiedImageError

    from ltx_pipelines.io.image import image_too_large

    where = f"--image {str(image.path)!r}"
    if not image.path.is_file():
        raise FlagError(f"{where}: no such file" if not image.path.exists() else f"{where} is not a file")
    try:
        with Image.open(image.path) as im:
            im.size  # noqa: B018 - opening reads the header; a non-image raises here
    except Image.DecompressionBombError as e:
        raise FlagError(f"--image {image_too_large(image.path, e)}") from None
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


FLAG = "--num-generated-keyframes"


@dataclass(frozen=True)
class GeneratedKeyframeFlags(FlagGroup[int]):
    """`--num-generated-keyframes`, read as the count the pipeline's `generated_keyframes` takes."""

    sections = (
        FlagSection(
            "generated keyframes",
            (
                Flag(
                    FLAG,
                    {
                        "type": int,
                        "default": 0,
                        "metavar": "N",
                        "help": "Extra keyframes generated in stage 1 at N evenly spaced interior frames (both end "
                        "frames excluded; default: 0, off). Each sharpens the motion around its frame but costs a "
                        "whole latent frame of tokens for one pixel frame (about N / latent frames more sequence "
                        "length). Needs a transformer with the keyframe embedding (use_keyframes_abs_pos_embedding: "
                        "LTX-2.5).",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[int]:
        from ltx_pipelines.engine.requests import generated_keyframe_positions

        count = args.num_generated_keyframes
        video = context.values[VideoFlags]
        if count < 0:
            raise FlagError(f"{FLAG} {count} is not accepted: it must be 0 (off) or a positive count")
        # A length the duration head picks is only known at run time: the pipeline checks it then.
        if video.duration is None:
            try:
                generated_keyframe_positions(count, video.num_frames)
            except ValueError as e:
                raise FlagError(f"{FLAG}: {e} (--num-frames {video.num_frames})") from None
        # Slots need the transformer's keyframe embedding: checked once the model files are known.
        return self._reading(int(count), settle=count != 0)

    def settle(self, value: int, models: RunModels, context: ReadContext) -> Reading[int]:
        from ltx_pipelines.engine.requests import keyframe_embedding_problem

        problem = keyframe_embedding_problem(models.checkpoint)
        if problem is not None:
            raise FlagError(f"{FLAG} {value} cannot run on {models.checkpoint}: {problem}")
        return self._reading(value)

    def _reading(self, value: int, *, settle: bool = False) -> Reading[int]:
        return Reading(
            value,
            record={"num_generated_keyframes": value},
            call_arguments={"generated_keyframes": value},
            settle=settle,
        )
