"""The runtime flag group: where and how the models run (`--device`, `--dtype`) and how they fit and how fast
they run (`--quantization`, `--offload`, `--compile`, `--attention-backend` for the transformer, `--gemma-8bit`
for the text encoder). The transformer's options map onto `ltx_core.runtime`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ltx_core.runtime_choices import (
    ACCEPTED_BACKEND_NAMES,
    OFFLOAD_CHOICES,
    QUANTIZATION_CHOICES,
    TEXT_ENCODER_MODES,
)
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.engine.defaults import PipelineDefaults

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


@dataclass(frozen=True)
class RuntimeFlags(FlagGroup[RuntimeChoice]):
    """`memory=False` leaves out the transformer's memory and speed flags (and `--gemma-8bit`)."""

    memory: bool = True

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        placement = parser.add_argument_group("device")
        placement.add_argument(
            "--device",
            type=str,
            default=None,
            help="Torch device: cpu, cuda, cuda:N or mps (default: CUDA, then MPS, then CPU).",
        )
        placement.add_argument(
            "--dtype",
            choices=DTYPE_CHOICES,
            default=None,
            help=f"Precision of the model weights and activations (default: {defaults.dtype}).",
        )
        if not self.memory:
            return
        group = parser.add_argument_group("memory and speed")
        group.add_argument(
            "--quantization",
            choices=QUANTIZATION_CHOICES,
            default=None,
            help="fp8-cast: transformer-block weights stored as float8 and upcast per layer (about half the weight "
            "memory, any device); fp8-scaled-mm: fp8 matmuls on GPUs with native fp8 (compute capability >= 8.9) "
            "from an fp8 checkpoint (default: none).",
        )
        group.add_argument(
            "--offload",
            choices=(*OFFLOAD_CHOICES, "auto"),
            default="auto",
            help="Stream the transformer blocks to the device a few at a time: cpu keeps every block in (pinned) "
            "RAM, disk reads them from the checkpoint as needed (least memory). Same output as none. auto picks, "
            "for the transformer and the text encoder each, the fastest of full load, fp8, streaming from RAM and "
            "streaming from disk that fits the free memory, and logs why (default: auto).",
        )
        group.add_argument(
            "--compile",
            nargs="*",
            default=None,
            metavar="KEY=VALUE",
            help="torch.compile each transformer block (e.g. --compile mode=max-autotune-no-cudagraphs "
            "backend=inductor dynamic=true inductor.X=... dynamo.X=...); bare --compile uses the defaults "
            "(default: off).",
        )
        group.add_argument(
            "--gemma-8bit",
            action="store_true",
            help="Encode the prompt with an 8-bit (LLM.int8()) Gemma: about half the text encoder's memory, close "
            "contexts; needs CUDA and bitsandbytes (default: off).",
        )
        _add_text_encoder_mode(group)
        group.add_argument(
            "--attention-backend",
            choices=ACCEPTED_BACKEND_NAMES,
            default="auto",
            help="Attention kernel: sdpa, flash3 (FlashAttention 3, Hopper), flash4 (FlashAttention 4, Blackwell), "
            "mps-sdpa (Apple silicon); auto picks per device and logs its choice (default: auto).",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> RuntimeChoice:
        from ltx_core.devices import parse_dtype
        from ltx_core.runtime import RuntimeOptions

        device = checked_device(args.device)
        name = context.defaults.dtype if args.dtype is None else args.dtype
        try:
            dtype = parse_dtype(name)
        except ValueError as e:
            raise FlagError(f"--dtype: {e}") from None
        if not self.memory:
            return RuntimeChoice(device=device, dtype=dtype, options=None, gemma_8bit=False, given={})
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
        return RuntimeChoice(
            device=device, dtype=dtype, options=options, gemma_8bit=bool(args.gemma_8bit), given=given,
            offload_auto=auto, text_encoder_mode=args.text_encoder_mode,
        )  # fmt: skip

    def record(self, value: RuntimeChoice) -> dict[str, Any]:
        recorded = {"device": str(value.device), "dtype": str(value.dtype).removeprefix("torch."), **value.given}
        if self.memory:
            recorded["gemma_8bit"] = value.gemma_8bit
            recorded["text_encoder_mode"] = value.text_encoder_mode
        return recorded


def _add_text_encoder_mode(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--text-encoder-mode",
        choices=TEXT_ENCODER_MODES,
        default=None,
        help="How Gemma is held while encoding: full, fp8 (layer weights stored as float8, upcast per layer; "
        "close contexts, any device), stream-ram / stream-disk (one decoder layer on the device at a time from "
        "RAM or the files; the same contexts) (default: the one matching --offload: none -> full, cpu -> "
        "stream-ram, disk -> stream-disk).",
    )


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
