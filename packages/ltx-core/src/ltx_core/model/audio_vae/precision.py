"""Running a vocoder in float32 whatever dtype its weights were loaded in.

The vocoders chain on the order of a hundred convolutions; in bfloat16 the rounding errors add up to an
audible loss of spectral accuracy, and the model is small, so it always computes in float32. Weights
held in a lower precision are upcast for the duration of one call (the module itself is not changed).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call


def weights_are_float32(module: nn.Module) -> bool:
    tensors = (*module.parameters(), *module.buffers())
    return all(t.dtype == torch.float32 for t in tensors if t.is_floating_point())


def call_with_float32_weights(module: nn.Module, *args: torch.Tensor) -> torch.Tensor:
    """`module(*args)` with every floating parameter and buffer replaced by a float32 copy for this call."""
    upcast = {
        name: t.float() if t.is_floating_point() else t
        for name, t in (*module.named_parameters(), *module.named_buffers())
    }
    return functional_call(module, upcast, args)


def check_mel(name: str, mel: torch.Tensor, mel_bins: int) -> None:
    """A vocoder input must be a stereo log-mel (batch, 2, frames, mel_bins)."""
    if mel.dim() != 4 or mel.shape[1] != 2 or mel.shape[3] != mel_bins:
        raise ValueError(
            f"{name} expects a stereo log-mel (batch, 2, frames, {mel_bins}), got shape {tuple(mel.shape)}"
        )
    if mel.shape[2] < 1:
        raise ValueError(f"{name} got a log-mel with no frames (shape {tuple(mel.shape)})")
    if not mel.is_floating_point():
        raise ValueError(f"{name} expects a floating log-mel, got {mel.dtype}")
