"""The runtime flag group: where and how the models run (`--device`, `--dtype`) and how they fit and how fast
they run (`--quantization`, `--offload`, `--compile`, `--attention-backend` for the transformer, `--gemma-8bit`
for the text encoder). The transformer's options map onto `ltx_core.runtime`.

The tiling group: the VAE decode tiling flags every command that decodes video shares. Unset flags keep what the
layout would otherwise be: the automatic layout for the output size in a generation run, the run's recorded layout
in `python -m ltx_pipelines.decode`.

The output flag group: where the result goes and what is kept (`--output-path`, `--overwrite`,
`--no-audio-output`, `--save-latents`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_core.model.video_vae.tiling_config import AxisTiling, TilingConfig
from ltx_core.runtime_choices import (
    ACCEPTED_BACKEND_NAMES,
    OFFLOAD_CHOICES,
    QUANTIZATION_CHOICES,
    TEXT_ENCODER_MODES,
)
from ltx_core.types import DEFAULT_SCALE_FACTORS
from ltx_pipelines.cli.arg_types import non_negative_int
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading, add_sections
from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS
from ltx_pipelines.io.atomic_files import check_output_pair

if TYPE_CHECKING:
    import torch

    from ltx_core.runtime import RuntimeOptions


DTYPE_CHOICES = ("bfloat16", "float32")


@dataclass(frozen=True)
class RuntimeChoice:
    device: torch.device
    dtype: torch.dtype
    options: RuntimeOptions | None
    """fp8 / streaming / compile / attention choices of the transformer; None: a plain load."""
    gemma_8bit: bool
    given: dict[str, Any]
    """The transformer flags as typed (the sidecar records them)."""
    offload_auto: bool = False
    """`--offload auto`: the memory check picks the modes (`ltx_core.offload_auto`) and sets `options`."""
    text_encoder_mode: str | None = None
    """--text-encoder-mode, or what `--offload auto` picked when it was not given (None: the mode following
    --offload; see `ltx_core.text_encoders.gemma.modes`)."""


_DEVICE_FLAGS = FlagSection(
    "device",
    (
        Flag(
            "--device",
            {
                "type": str,
                "default": None,
                "help": "Torch device: cpu, cuda, cuda:N or mps (default: CUDA, then MPS, then CPU).",
            },
        ),
        Flag(
            "--dtype", {"choices": DTYPE_CHOICES, "help": "Precision of the model weights and activations"}, "{dtype}"
        ),
    ),
)


_MEMORY_FLAGS = FlagSection(
    "memory and speed",
    (
        Flag(
            "--quantization",
            {
                "choices": QUANTIZATION_CHOICES,
                "default": None,
                "help": "fp8-cast: transformer-block weights stored as float8 and upcast per layer (about half the "
                "weight memory, any device); fp8-scaled-mm: fp8 matmuls on GPUs with native fp8 (compute capability "
                ">= 8.9) from an fp8 checkpoint (default: none).",
            },
        ),
        Flag(
            "--offload",
            {
                "choices": (*OFFLOAD_CHOICES, "auto"),
                "default": "auto",
                "help": "Stream the transformer blocks to the device a few at a time: cpu keeps every block in "
                "(pinned) RAM, disk reads them from the checkpoint as needed (least memory). Same output as none. "
                "auto picks, for the transformer and the text encoder each, the fastest of full load, fp8, streaming "
                "from RAM and streaming from disk that fits the free memory, and logs why (default: auto).",
            },
        ),
        Flag(
            "--compile",
            {
                "nargs": "*",
                "default": None,
                "metavar": "KEY=VALUE",
                "help": "torch.compile each transformer block (e.g. --compile mode=max-autotune-no-cudagraphs "
                "backend=inductor dynamic=true inductor.X=... dynamo.X=...); bare --compile uses the defaults "
                "(default: off).",
            },
        ),
        Flag(
            "--gemma-8bit",
            {
                "action": "store_true",
                "help": "Encode the prompt with an 8-bit (LLM.int8()) Gemma: about half the text encoder's memory, "
                "close contexts; needs CUDA and bitsandbytes (default: off).",
            },
        ),
        Flag(
            "--text-encoder-mode",
            {
                "choices": TEXT_ENCODER_MODES,
                "default": None,
                "help": "How Gemma is held while encoding: full, fp8 (layer weights stored as float8, upcast per "
                "layer; close contexts, any device), stream-ram / stream-disk (one decoder layer on the device at a "
                "time from RAM or the files; the same contexts) (default: the one matching --offload: none -> full, "
                "cpu -> stream-ram, disk -> stream-disk).",
            },
        ),
        Flag(
            "--attention-backend",
            {
                "choices": ACCEPTED_BACKEND_NAMES,
                "default": "auto",
                "help": "Attention kernel: sdpa, flash3 (FlashAttention 3, Hopper), flash4 (FlashAttention 4, "
                "Blackwell), mps-sdpa (Apple silicon); auto picks per device and logs its choice (default: auto).",
            },
        ),
    ),
)


@dataclass(frozen=True)
class RuntimeFlags(FlagGroup[RuntimeChoice]):
    """`memory=False` leaves out the transformer's memory and speed flags (and `--gemma-8bit`)."""

    memory: bool = True
    sections: tuple[FlagSection, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sections", (_DEVICE_FLAGS, _MEMORY_FLAGS) if self.memory else (_DEVICE_FLAGS,))

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[RuntimeChoice]:
        from ltx_core.devices import parse_dtype
        from ltx_core.runtime import RuntimeOptions

        device = checked_device(args.device)
        name = context.defaults.dtype if args.dtype is None else args.dtype
        try:
            dtype = parse_dtype(name)
        except ValueError as e:
            raise FlagError(f"--dtype: {e}") from None
        if not self.memory:
            return self._reading(RuntimeChoice(device=device, dtype=dtype, options=None, gemma_8bit=False, given={}))
        try:
            auto = args.offload == "auto"  # settled by the memory check, once the model files are known
            offload = "none" if auto else args.offload
            options = RuntimeOptions.from_flags(args.quantization, offload, args.compile, args.attention_backend)
            options = None if options == RuntimeOptions() else options
            if options is not None:
                options.validate(device)
        except (ValueError, RuntimeError) as e:
            raise FlagError(str(e)) from None
        if args.gemma_8bit:
            from ltx_core.text_encoders.gemma.eight_bit import gemma_8bit_unavailable

            reason = gemma_8bit_unavailable(device)
            if reason is not None:
                raise FlagError(f"--gemma-8bit needs {reason}; leave it off on this machine")
            if args.offload not in ("none", "auto"):
                raise FlagError(
                    f"--gemma-8bit cannot be combined with --offload {args.offload} (an 8-bit Gemma is not offloaded)"
                )
            if args.text_encoder_mode not in (None, "full"):
                raise FlagError(f"--gemma-8bit cannot be combined with --text-encoder-mode {args.text_encoder_mode}")
        given = {
            "quantization": args.quantization,
            "offload": args.offload,
            "compile": args.compile,
            "attention_backend": args.attention_backend,
        }
        return self._reading(RuntimeChoice(
            device=device, dtype=dtype, options=options, gemma_8bit=bool(args.gemma_8bit), given=given,
            offload_auto=auto, text_encoder_mode=args.text_encoder_mode,
        ))  # fmt: skip

    def _reading(self, value: RuntimeChoice) -> Reading[RuntimeChoice]:
        recorded = {"device": str(value.device), "dtype": str(value.dtype).removeprefix("torch."), **value.given}
        if self.memory:
            recorded["gemma_8bit"] = value.gemma_8bit
            recorded["text_encoder_mode"] = value.text_encoder_mode
        return Reading(value, record=recorded)


def checked_device(name: str | None) -> torch.device:
    """`--device` as a torch device that exists on this machine (None: CUDA, then MPS, then the CPU)."""
    import torch

    from ltx_core.devices import default_device

    if name is None:
        return default_device()
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise FlagError(f"--device {name!r} is not a device; accepted: cpu, cuda, cuda:N, mps") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise FlagError(f"--device {name!r}: CUDA is not available on this machine; use --device cpu")
        if device.index is not None and device.index >= count:
            raise FlagError(f"--device {name!r}: there are only {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise FlagError(f"--device {name!r}: Apple MPS is not available on this machine; use --device cpu")
    elif device.type != "cpu":
        raise FlagError(f"--device {name!r} is not supported; accepted: cpu, cuda, cuda:N, mps")
    return device


AUTO_LONG_SIDE = AxisTiling(768, 64)


AUTO_FRAMES = AxisTiling(80, 24)


def tiling_flags(unset_means: str) -> FlagSection:
    """The tiling flags; `unset_means`: what an unset flag keeps (in the section's title)."""
    return FlagSection(
        f"VAE decode tiling (unset: {unset_means})",
        (
            Flag(
                "--tile-size",
                {
                    "type": non_negative_int,
                    "default": None,
                    "metavar": "PIXELS",
                    "help": "Square spatial tiles of this size (a multiple of 32, at least 64); 0 decodes each frame "
                    f"whole (automatic: {AUTO_LONG_SIDE.tile_size} on the long side, as many tiles on the short "
                    "side).",
                },
            ),
            Flag(
                "--tile-overlap",
                {
                    "type": non_negative_int,
                    "default": None,
                    "metavar": "PIXELS",
                    "help": "Pixels shared by neighbouring spatial tiles, a multiple of 32 (automatic: "
                    f"{AUTO_LONG_SIDE.overlap}).",
                },
            ),
            Flag(
                "--tile-frames",
                {
                    "type": non_negative_int,
                    "default": None,
                    "metavar": "FRAMES",
                    "help": "Temporal tiles of this many frames (a multiple of 8, at least 16); 0 decodes all frames "
                    f"at once (automatic: {AUTO_FRAMES.tile_size}).",
                },
            ),
            Flag(
                "--tile-frame-overlap",
                {
                    "type": non_negative_int,
                    "default": None,
                    "metavar": "FRAMES",
                    "help": "Frames shared by neighbouring temporal tiles, a multiple of 8 (automatic: "
                    f"{AUTO_FRAMES.overlap}).",
                },
            ),
        ),
    )


def add_tiling_args(parser: argparse.ArgumentParser, *, unset_means: str) -> None:
    """The tiling flags of a command that is not a list of flag groups (`python -m ltx_pipelines.decode`)."""
    add_sections(parser, (tiling_flags(unset_means),), LTX_2_3_DEFAULTS)  # no run defaults among them


def tiling_from_args(
    args: argparse.Namespace, *, height: int | None, width: int | None, base: TilingConfig | None = None
) -> TilingConfig | None:
    """The layout the tiling flags ask for over `base` (None: the automatic layout for `height` x `width`);
    None when no flag is given. A flag value off the VAE grid raises ValueError naming the flag."""
    size, overlap = args.tile_size, args.tile_overlap
    frames, frame_overlap = args.tile_frames, args.tile_frame_overlap
    if (size, overlap, frames, frame_overlap) == (None, None, None, None):
        return base
    scale = DEFAULT_SCALE_FACTORS
    if overlap is not None and overlap % scale.height:
        raise ValueError(f"--tile-overlap {overlap} is not accepted: it must be a multiple of {scale.height}")
    if base is None:
        long_side = AUTO_LONG_SIDE if overlap is None else replace(AUTO_LONG_SIDE, overlap=overlap)
        if height and width and size is None and overlap is not None and overlap >= long_side.tile_size:
            raise ValueError(f"--tile-overlap {overlap} is not accepted: it must be smaller than the tile size")
        base_spatial = (
            TilingConfig.for_output(height, width, scale, long_side=long_side)
            if height and width and size is None
            else TilingConfig(AUTO_FRAMES, AUTO_LONG_SIDE, AUTO_LONG_SIDE)
        )
        base = TilingConfig(AUTO_FRAMES, base_spatial.height, base_spatial.width)

    def axis(current: AxisTiling, tile: int | None, shared: int | None, size_flag: str, overlap_flag: str, factor: int):
        tile = current.tile_size if tile is None else tile
        if tile == 0:
            return AxisTiling()
        shared = (current.overlap if current.tiled else 0) if shared is None else shared
        minimum = 2 * factor
        if tile < minimum or tile % factor:
            raise ValueError(f"{size_flag} {tile} is not accepted: use 0 (off) or a multiple of {factor}, >= {minimum}")
        if shared % factor or shared >= tile:
            raise ValueError(
                f"{overlap_flag} {shared} is not accepted: it must be a multiple of {factor} smaller than "
                f"the tile size {tile}"
            )
        return AxisTiling(tile, shared)

    return TilingConfig(
        frames=axis(base.frames, frames, frame_overlap, "--tile-frames", "--tile-frame-overlap", scale.time),
        height=axis(base.height, size, overlap, "--tile-size", "--tile-overlap", scale.height),
        width=axis(base.width, size, overlap, "--tile-size", "--tile-overlap", scale.width),
    )


@dataclass(frozen=True)
class TilingChoice:
    config: TilingConfig | None
    """The decode layout the flags ask for; None when no flag is given (the automatic layout per output size)."""
    given: dict[str, int | None]
    """The flags as typed (the sidecar records them)."""


@dataclass(frozen=True)
class TilingFlags(FlagGroup[TilingChoice]):
    """The tiling flags of a generation run, read after the group that sets the output size (`size_from`,
    whose value has `height` and `width`; the automatic layout follows the output size). Without that group
    (retake: the source's size) the layout is the one for any size."""

    size_from: type | None = None
    """None: the video group."""
    sections = (tiling_flags("automatic, from the output size"),)

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[TilingChoice]:
        from ltx_pipelines.cli.request_flags import VideoFlags

        sized = context.values.get(self.size_from or VideoFlags)
        height, width = (sized.height, sized.width) if sized is not None else (None, None)
        try:
            config = tiling_from_args(args, height=height, width=width)
        except ValueError as e:
            raise FlagError(str(e)) from None
        names = ("tile_size", "tile_overlap", "tile_frames", "tile_frame_overlap")
        given = {name: getattr(args, name) for name in names}
        return Reading(TilingChoice(config, given), record=given, memory_inputs={"tiling": config})


@dataclass(frozen=True)
class OutputChoice:
    path: Path
    given: str
    """`--output-path` as typed (the sidecar records it)."""
    overwrite: bool
    save_latents: bool
    audio_output: bool
    """Whether the written video carries the audio stream (`--no-audio-output` leaves it out)."""


@dataclass(frozen=True)
class OutputFlags(FlagGroup[OutputChoice]):
    """`suffixes`: what `--output-path` may end in (audio-only pipelines write `.wav`). The sidecar beside
    the output is protected like the output itself."""

    suffixes: tuple[str, ...] = (".mp4",)
    sections = (
        FlagSection(
            "output",
            (
                Flag(
                    "--output-path",
                    {
                        "type": str,
                        "required": True,
                        "help": "Where to write the result (.mp4; .wav for audio-only pipelines); its folder is "
                        "created.",
                    },
                ),
                Flag(
                    "--overwrite",
                    {"action": "store_true", "help": "Replace the output file if it exists (refused otherwise)."},
                ),
                Flag(
                    "--no-audio-output",
                    {
                        "action": "store_true",
                        "help": "Write the video without its audio stream (the audio is still generated alongside "
                        "the video).",
                    },
                ),
                Flag(
                    "--save-latents",
                    {
                        "action": "store_true",
                        "help": "Keep the denoised latents beside the video (<output stem>.latents.safetensors) even "
                        "when the run succeeds; they are always kept when decoding or encoding fails. Decode them "
                        "again with python -m ltx_pipelines.decode --latents FILE --output-path OUT.",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[OutputChoice]:
        raw = args.output_path
        path = Path(raw).expanduser()
        if path.suffix.lower() not in self.suffixes:
            raise FlagError(f"--output-path {raw!r}: the file name must end in {' or '.join(self.suffixes)}")
        if args.no_audio_output and path.suffix.lower() == ".wav":
            raise FlagError(f"--no-audio-output: --output-path {raw!r} is an audio file; the flag applies to videos")
        overwrite = bool(args.overwrite)
        try:
            path = check_output_pair(path, overwrite=overwrite)
        except FileExistsError as e:
            raise FlagError(f"--output-path: {e}") from None
        except OSError as e:
            raise FlagError(f"--output-path {raw!r}: {e}") from None
        value = OutputChoice(
            path=path,
            given=raw,
            overwrite=overwrite,
            save_latents=bool(args.save_latents),
            audio_output=not args.no_audio_output,
        )
        recorded = {
            "output_path": raw,
            "overwrite": overwrite,
            "no_audio_output": not value.audio_output,
            "save_latents": value.save_latents,
        }
        return Reading(value, record=recorded)
