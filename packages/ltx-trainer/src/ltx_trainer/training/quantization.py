"""Weight quantization of the frozen transformer for LoRA training (`acceleration.quantization`).

optimum-quanto swaps the selected `nn.Linear` layers for its `QLinear`, whose weights are stored in the
chosen low-precision type and dequantized on the fly; LoRA adapters (peft) then wrap those layers and
train in full precision beside them. Only the saved adapters leave the run, so nothing about the LoRA
files changes: the base stays the user's checkpoint.

What is quantized: every Linear of the transformer except the layers named by `FULL_PRECISION_PATTERNS`
(the input/output projections, everything AdaLN and timestep embedding, caption projections and norms).
A pattern matches a module's full path or the path of one of its parents, so excluding a module keeps its
whole subtree in full precision. (The reference lists the same patterns, but its block-by-block path
matches them against names relative to each top-level child, so the top-level AdaLN and caption Linears
end up quantized there; we follow the list's stated intent.)

The work is done one transformer block at a time on the training device: a CUDA run builds the model in
host memory and moves each block to the GPU only to quantize it there, so the GPU never holds more than
the quantized model plus one full-precision block.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
from torch import nn
from tqdm import tqdm

logger = logging.getLogger(__name__)

# `acceleration.quantization` value -> optimum.quanto weight type name.
QUANTO_WEIGHT_TYPES: dict[str, str] = {
    "int8-quanto": "qint8",
    "int4-quanto": "qint4",
    "int2-quanto": "qint2",
    "fp8-quanto": "qfloat8",
    "fp8uz-quanto": "qfloat8_e4m3fnuz",
}

# Layers kept in full precision: the in/out projections see the raw latents and produce the prediction,
# and the AdaLN / timestep / caption layers take float32 sinusoidal or text inputs that low-bit kernels
# handle badly; together they are a negligible share of the weights.
FULL_PRECISION_PATTERNS: tuple[str, ...] = (
    "patchify_proj",
    "audio_patchify_proj",
    "proj_out",
    "audio_proj_out",
    "*adaln*",
    "time_proj",
    "timestep_embedder*",
    "caption_projection*",
    "audio_caption_projection*",
    "*norm*",
)

QUANTO_EXTRA_HINT = "pip install 'ltx-trainer[quanto]' (or: uv sync --extra quanto)"


@dataclass(frozen=True)
class QuantizedTransformer:
    """What `quantize_transformer` did: the Linear layers quantized and those kept in full precision."""

    setting: str
    quantized: tuple[str, ...]
    kept: tuple[str, ...]


def require_quanto(setting: str) -> ModuleType:
    """optimum.quanto, or a clear error naming the setting and the extra that installs it."""
    if setting not in QUANTO_WEIGHT_TYPES:
        raise ValueError(
            f"acceleration.quantization {setting!r} is not supported; accepted: {', '.join(QUANTO_WEIGHT_TYPES)} "
            "or null"
        )
    try:
        import optimum.quanto as quanto
    except ImportError:
        raise ValueError(
            f"acceleration.quantization {setting!r} needs optimum-quanto, which is not installed: "
            f"{QUANTO_EXTRA_HINT}; or set acceleration.quantization: null"
        ) from None
    return quanto


PACKED_SETTINGS = ("int4-quanto", "int2-quanto")
"""Sub-byte weights are unpacked on the CPU by a C++ extension optimum-quanto compiles on first use."""


def cpp_compiler() -> str | None:
    """The C++ compiler torch's extension builder would use (`$CXX`, else `c++`), if it is installed and
    this Python has the headers an extension is built against."""
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(os.environ.get("CXX", "c++")) if headers.is_file() else None


def check_quantization_device(setting: str, device: torch.device) -> None:
    """Refuse what quanto cannot run on `device`, before any weight is read."""
    if setting.startswith("fp8") and device.type == "mps":
        raise ValueError(
            f"acceleration.quantization {setting!r}: float8 weights are not supported on MPS; "
            "use int8-quanto, int4-quanto or int2-quanto there"
        )
    if setting in PACKED_SETTINGS and device.type == "cpu" and cpp_compiler() is None:
        raise ValueError(
            f"acceleration.quantization {setting!r} on the CPU needs a C++ compiler and the Python headers "
            "(optimum-quanto builds its weight-unpacking extension on first use); one of them is missing (set CXX "
            "or install g++ and the Python development headers); "
            "int8-quanto and fp8-quanto need none"
        )


def keeps_full_precision(name: str) -> bool:
    """True when `name` (a module path in the transformer) or one of its parents matches a pattern."""
    parts = name.split(".")
    prefixes = [".".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(p, pattern) for p in prefixes for pattern in FULL_PRECISION_PATTERNS)


def split_linears(model: nn.Module) -> tuple[list[str], list[str]]:
    """The model's Linear layers as (to quantize, kept in full precision), by full module path."""
    quantize, keep = [], []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            (keep if keeps_full_precision(name) else quantize).append(name)
    return quantize, keep


def _quantize_within(quanto: ModuleType, owner: nn.Module, names: list[str], qtype: object) -> None:
    """Quantize the Linears `names` (paths relative to `owner`) and freeze them to their stored form."""
    if not names:
        return
    # quanto's include patterns are shell patterns; module paths hold no wildcard characters, so each
    # name matches exactly itself.
    quanto.quantize(owner, weights=qtype, include=names)
    quanto.freeze(owner)


def quantize_transformer(
    model: nn.Module, setting: str, device: torch.device, *, progress: bool = True
) -> QuantizedTransformer:
    """Quantize `model`'s weights in place with optimum-quanto (block by block on `device`), move the
    whole model to `device` and freeze it (no parameter requires grad)."""
    quanto = require_quanto(setting)
    check_quantization_device(setting, device)
    qtype = getattr(quanto, QUANTO_WEIGHT_TYPES[setting])
    to_quantize, kept = split_linears(model)
    blocks = getattr(model, "transformer_blocks", None)
    rest = to_quantize
    if isinstance(blocks, nn.ModuleList):
        for index, block in enumerate(tqdm(blocks, desc=f"quantizing ({setting})", disable=not progress)):
            prefix = f"transformer_blocks.{index}."
            block.to(device)
            _quantize_within(quanto, block, [n[len(prefix) :] for n in to_quantize if n.startswith(prefix)], qtype)
        rest = [n for n in to_quantize if not n.startswith("transformer_blocks.")]
    model.to(device)
    _quantize_within(quanto, model, rest, qtype)
    model.requires_grad_(False)
    logger.info(
        "quantized %d Linear layers to %s (%s); %d kept in full precision",
        len(to_quantize), QUANTO_WEIGHT_TYPES[setting], setting, len(kept),
    )  # fmt: skip
    return QuantizedTransformer(setting=setting, quantized=tuple(to_quantize), kept=tuple(kept))
