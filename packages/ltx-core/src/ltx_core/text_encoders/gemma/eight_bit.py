"""8-bit Gemma (LLM.int8() through bitsandbytes): about half the memory of the bf16 encoder.

transformers quantizes the Linear layers while it loads them onto the GPU, so the full-precision model
never has to exist in host or device memory. Every Linear except the vocabulary head becomes a
bitsandbytes `Linear8bitLt` with the LLM.int8() outlier threshold of 6.0 (activation columns above it
run in 16 bits), as the reference trainer does; prompt encoding never runs the head, and keeping it in
full precision protects prompt enhancement's logits. bitsandbytes' int8 kernels need CUDA.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

# Outlier threshold of LLM.int8() (also transformers' default `llm_int8_threshold`).
LLM_INT8_THRESHOLD = 6.0
FULL_PRECISION_MODULES = ("lm_head",)


class Gemma8bitUnavailable(ValueError):
    """8-bit Gemma was asked for on a machine that cannot run it (no CUDA or no bitsandbytes)."""


def bitsandbytes_installed() -> bool:
    return importlib.util.find_spec("bitsandbytes") is not None


def gemma_8bit_unavailable(device: torch.device) -> str | None:
    """Why an 8-bit Gemma cannot be loaded for `device` (None when it can)."""
    missing = []
    if device.type != "cuda":
        missing.append(f"a CUDA device (this run uses {device.type})")
    if not bitsandbytes_installed():
        missing.append("the bitsandbytes package (pip install bitsandbytes)")
    return " and ".join(missing) or None


def require_gemma_8bit(device: torch.device, setting: str) -> None:
    """Raise `Gemma8bitUnavailable` naming `setting` (the user's flag or field) when 8-bit Gemma cannot run
    here - before any weight is read."""
    reason = gemma_8bit_unavailable(device)
    if reason is not None:
        raise Gemma8bitUnavailable(
            f"{setting}: an 8-bit Gemma text encoder needs {reason}; turn {setting} off on this machine"
        )


def gemma_8bit_config() -> Any:
    """The transformers quantization config of the 8-bit encoder."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_8bit=True,
        llm_int8_threshold=LLM_INT8_THRESHOLD,
        llm_int8_skip_modules=list(FULL_PRECISION_MODULES),
    )
