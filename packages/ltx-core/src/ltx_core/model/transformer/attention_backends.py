"""Attention kernels behind one call signature, chosen per call.

`attend(q, k, v, heads, mask)` takes (B, T, heads * head_dim) tensors. PyTorch SDPA is the default
and the only backend for masked calls (the flash kernels take no additive mask). Without a mask,
FlashAttention 3 (`flash_attn_interface`, Hopper) or 4 (`flash_attn.cute`, Hopper/Blackwell) run
on CUDA half-precision inputs when installed, and Apple's `mps_sdpa` on MPS. The optional kernels
are probed once at import; a missing or broken install simply leaves SDPA in charge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

try:  # FlashAttention 3
    from flash_attn_interface import flash_attn_func as _fa3_func
except Exception:
    _fa3_func = None
try:  # FlashAttention 4; a mismatched cutlass-dsl raises other errors than ImportError
    from flash_attn.cute import flash_attn_func as _fa4_func
except Exception:
    _fa4_func = None
try:  # Apple Silicon fused attention
    from mps_sdpa import sdpa_opt as _mps_sdpa_func
except Exception:
    _mps_sdpa_func = None

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, "torch.Tensor | None"], torch.Tensor]

_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_FLASH_MAX_HEAD_DIM = 256


class AttentionBackend(Enum):
    SDPA = "sdpa"
    FLASH_ATTENTION_3 = "flash_attention_3"
    FLASH_ATTENTION_4 = "flash_attention_4"
    MPS_SDPA = "mps_sdpa"


def available_backends() -> tuple[AttentionBackend, ...]:
    found = [AttentionBackend.SDPA]
    if _fa3_func is not None:
        found.append(AttentionBackend.FLASH_ATTENTION_3)
    if _fa4_func is not None:
        found.append(AttentionBackend.FLASH_ATTENTION_4)
    if _mps_sdpa_func is not None:
        found.append(AttentionBackend.MPS_SDPA)
    return tuple(found)


def select_backend(q: torch.Tensor, heads: int, masked: bool) -> AttentionBackend:
    """The fastest backend that can serve this call."""
    if masked:
        return AttentionBackend.SDPA
    device = q.device
    if device.type == "cuda" and q.dtype in _FLASH_DTYPES and q.shape[-1] // heads <= _FLASH_MAX_HEAD_DIM:
        major, _ = torch.cuda.get_device_capability(device)
        if major == 9 and _fa3_func is not None:
            return AttentionBackend.FLASH_ATTENTION_3
        if major in (9, 10) and _fa4_func is not None:
            return AttentionBackend.FLASH_ATTENTION_4
    if device.type == "mps" and _mps_sdpa_func is not None:
        return AttentionBackend.MPS_SDPA
    return AttentionBackend.SDPA


def _heads_first(t: torch.Tensor, heads: int) -> torch.Tensor:
    b, n, width = t.shape
    return t.view(b, n, heads, width // heads).transpose(1, 2)


def _mask_4d(mask: torch.Tensor) -> torch.Tensor:
    if mask.ndim == 3:  # (B, T, S): the same bias for every head
        mask = mask.unsqueeze(1)
    if mask.ndim != 4:
        raise ValueError(f"attention bias must be (B, T, S) or (B, heads|1, T|1, S), got {tuple(mask.shape)}")
    return mask


def sdpa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """PyTorch scaled-dot-product attention; `mask` is an additive bias broadcastable to (B, H, T, S)."""
    b, t, _ = q.shape
    attn_mask = None if mask is None else _mask_4d(mask).to(q.dtype)
    out = F.scaled_dot_product_attention(
        _heads_first(q, heads), _heads_first(k, heads), _heads_first(v, heads), attn_mask=attn_mask
    )
    return out.transpose(1, 2).reshape(b, t, -1)


def _flash_attention(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, _ = q.shape
    q4, k4, v4 = (x.reshape(x.shape[0], x.shape[1], heads, -1) for x in (q, k, v))
    out = fn(q4, k4, v4)
    if isinstance(out, tuple):  # FA4 returns (out, lse)
        out = out[0]
    return out.reshape(b, t, -1)


def _mps_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, _ = q.shape
    out = _mps_sdpa_func(_heads_first(q, heads), _heads_first(k, heads), _heads_first(v, heads))
    return out.transpose(1, 2).reshape(b, t, -1)


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Multi-head attention on (B, T, heads * head_dim) inputs with the best available kernel."""
    backend = select_backend(q, heads, masked=mask is not None)
    if backend is AttentionBackend.FLASH_ATTENTION_3:
        return _flash_attention(_fa3_func, q, k, v, heads)
    if backend is AttentionBackend.FLASH_ATTENTION_4:
        return _flash_attention(_fa4_func, q, k, v, heads)
    if backend is AttentionBackend.MPS_SDPA:
        return _mps_attention(q, k, v, heads)
    return sdpa_attention(q, k, v, heads, mask)
