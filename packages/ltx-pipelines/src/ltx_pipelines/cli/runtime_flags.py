"""The run-time flags (`--quantization`, `--offload`, `--compile`, `--attention-backend` for the transformer,
`--gemma-8bit` for the text encoder): how the models fit on the user's GPU and how fast they run. The
transformer's map onto `ltx_core.runtime`."""

from __future__ import annotations

import argparse

from ltx_core.model.transformer.attention_backends import ACCEPTED_BACKEND_NAMES
from ltx_core.runtime import OFFLOAD_CHOICES, QUANTIZATION_CHOICES, RuntimeOptions


def add_runtime_args(parser: argparse.ArgumentParser) -> None:
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
        choices=OFFLOAD_CHOICES,
        default="none",
        help="Stream the transformer blocks to the device a few at a time: cpu keeps every block in (pinned) RAM, "
        "disk reads them from the checkpoint as needed (least memory). Same output as none (default: none).",
    )
    group.add_argument(
        "--compile",
        nargs="*",
        default=None,
        metavar="KEY=VALUE",
        help="torch.compile each transformer block (e.g. --compile mode=max-autotune-no-cudagraphs backend=inductor "
        "dynamic=true inductor.X=... dynamo.X=...); bare --compile uses the defaults (default: off).",
    )
    group.add_argument(
        "--gemma-8bit",
        action="store_true",
        help="Encode the prompt with an 8-bit (LLM.int8()) Gemma: about half the text encoder's memory, close "
        "contexts; needs CUDA and bitsandbytes (default: off).",
    )
    group.add_argument(
        "--attention-backend",
        choices=ACCEPTED_BACKEND_NAMES,
        default="auto",
        help="Attention kernel: sdpa, flash3 (FlashAttention 3, Hopper), flash4 (FlashAttention 4, Blackwell), "
        "mps-sdpa (Apple silicon); auto picks per device and logs its choice (default: auto).",
    )


def runtime_from_args(args: argparse.Namespace) -> RuntimeOptions | None:
    """The options the flags ask for; None when every flag is at its default (a plain load). Raises
    ValueError naming the flag for a value `ltx_core.runtime` refuses."""
    options = RuntimeOptions.from_flags(args.quantization, args.offload, args.compile, args.attention_backend)
    return None if options == RuntimeOptions() else options
