"""GGUF-quantized weights: stored as the file's raw blocks, dequantized just before each use.

A GGUF file (ComfyUI-GGUF's transformer files, or ours from `python -m ltx_core.convert to-gguf`)
stores each large 2-D weight in a ggml block format and the small / 1-D tensors as F32, F16 or
BF16. Such a weight is held in memory as a `GGUFTensor`: a uint8 tensor with the file's bytes
(rows x bytes-per-row), its `qtype` and the logical shape it dequantizes to; `shape` reports the
logical shape so that key/shape checks, `load_state_dict` and block bookkeeping treat it as the
weight it stands for. `GGUFLinear` dequantizes its weight to the activation dtype in `forward`, so
only one block's weights exist in full precision at a time.

Dequantization: Q8_0 (blocks of 32 int8 with one float16 scale) and BF16 run in torch on the
weight's device. The K-quants Q4_K, Q5_K and Q6_K (what Q4_K_M / Q5_K_M / Q6_K files are made of) run
in torch off the CPU and through the `gguf` package's numpy code on the CPU (faster there); every
other ggml type goes through that numpy code (a CUDA run then pays a host round trip per use).

LoRA (see `refuse_quantized_target`): a LoRA delta fused into a quantized weight is refused. Re-quantizing
the sum would round the delta away at 4-6 bits, and ComfyUI-GGUF's alternative (keep the patch and
add it at each dequantization) is a second fusion path that the rest of the loader does not have;
fuse into a bf16 file or convert the fused model instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf import quants as gguf_quants
from torch import nn
from torch.nn import functional as F

# ggml types whose bytes are plain torch dtypes (read as ordinary tensors, never kept quantized).
PLAIN_QTYPES: dict[GGMLQuantizationType, torch.dtype] = {
    GGMLQuantizationType.F32: torch.float32,
    GGMLQuantizationType.F16: torch.float16,
    GGMLQuantizationType.BF16: torch.bfloat16,
    GGMLQuantizationType.F64: torch.float64,
    GGMLQuantizationType.I8: torch.int8,
    GGMLQuantizationType.I16: torch.int16,
    GGMLQuantizationType.I32: torch.int32,
    GGMLQuantizationType.I64: torch.int64,
}

# Tensors whose dequantized copy is built per use: these are what `to-gguf` writes and what the
# ComfyUI-GGUF LTX files use (the K-quants are read only: the gguf package cannot quantize them).
WRITABLE_QTYPES = ("F16", "BF16", "Q8_0")


def qtype_named(name: str) -> GGMLQuantizationType:
    try:
        return GGMLQuantizationType[name]
    except KeyError:
        known = sorted(t.name for t in GGMLQuantizationType)
        raise ValueError(f"unknown GGUF tensor type {name!r}; known: {known}") from None


def is_block_qtype(name: str) -> bool:
    """True for the name of a ggml block type (Q8_0, Q4_K, ...), False for plain and unknown types."""
    qtype = GGMLQuantizationType.__members__.get(name)
    return qtype is not None and qtype not in PLAIN_QTYPES


def byte_shape(qtype: GGMLQuantizationType, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The uint8 shape (rows..., bytes per row) of a `shape` tensor stored as `qtype`."""
    block, type_size = GGML_QUANT_SIZES[qtype]
    if shape[-1] % block:
        raise ValueError(f"a {qtype.name} tensor needs rows of a multiple of {block} values, got shape {shape}")
    return (*shape[:-1], shape[-1] // block * type_size)


class GGUFTensor(torch.Tensor):
    """The raw ggml blocks of one weight (uint8), with its `qtype` and logical `shape`."""

    qtype: GGMLQuantizationType
    logical_shape: torch.Size

    @staticmethod
    def __new__(cls, raw: torch.Tensor, qtype: GGMLQuantizationType, shape: tuple[int, ...]) -> GGUFTensor:
        if raw.dtype != torch.uint8:
            raise ValueError(f"GGUF blocks are bytes (uint8), got {raw.dtype}")
        expected = byte_shape(qtype, tuple(shape))
        if tuple(raw.shape) != expected:
            raise ValueError(
                f"{qtype.name} blocks of a {tuple(shape)} tensor are {expected} bytes, got {tuple(raw.shape)}"
            )
        out = torch.Tensor._make_subclass(cls, raw, False)
        out.qtype = qtype
        out.logical_shape = torch.Size(shape)
        return out

    @property
    def shape(self) -> torch.Size:  # type: ignore[override]
        return self.logical_shape

    def size(self, dim: int | None = None) -> Any:  # type: ignore[override]
        return self.logical_shape if dim is None else self.logical_shape[dim]

    @property
    def raw(self) -> torch.Tensor:
        """The stored bytes as a plain uint8 tensor."""
        return self.as_subclass(torch.Tensor)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # Moves, detaches and copies (module.to, Parameter(...), requires_grad_) keep the blocks
        # what they are; every other op sees the plain bytes (GGUFLinear dequantizes before use).
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if func in _KEEPING_OPS and isinstance(out, torch.Tensor) and out.dtype == torch.uint8:
            source = next(a for a in args if isinstance(a, GGUFTensor))
            out = out.as_subclass(GGUFTensor)
            out.qtype = source.qtype
            out.logical_shape = source.logical_shape
        return out

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return f"GGUFTensor({self.qtype.name}, shape={tuple(self.logical_shape)}, device={self.device})"


_KEEPING_OPS = {
    torch.Tensor.to,
    torch.Tensor.detach,
    torch.Tensor.clone,
    torch.Tensor.cpu,
    torch.Tensor.cuda,
    torch.Tensor.requires_grad_,
    torch.Tensor.contiguous,
    torch.Tensor.pin_memory,
}


def quantized(raw: torch.Tensor, qtype: GGMLQuantizationType | str, shape: tuple[int, ...]) -> GGUFTensor:
    """Wrap the raw bytes of a ggml-typed tensor."""
    qt = qtype_named(qtype) if isinstance(qtype, str) else qtype
    return GGUFTensor(raw, qt, tuple(shape))


def _dequantize_q8_0(raw: torch.Tensor, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    # Block: float16 scale d, then 32 int8 values q; value = d * q.
    blocks = raw.reshape(-1, 34)
    scale = blocks[:, :2].contiguous().view(torch.float16).to(dtype)
    values = blocks[:, 2:].contiguous().view(torch.int8).to(dtype)
    return (values * scale).reshape(shape)


def _f16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    return blocks[:, start : start + 2].contiguous().view(torch.float16).float().reshape(-1)


def _k4_scales_mins(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # 12 bytes -> 8 six-bit scales and 8 six-bit mins (Q4_K / Q5_K): the first four of each in the low
    # 6 bits of bytes 0-3 / 4-7, the last four split over the low/high nibbles of bytes 8-11 and the
    # top two bits of bytes 0-3 / 4-7.
    s = packed.to(torch.int32)
    scales = torch.cat([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], dim=1)
    mins = torch.cat([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], dim=1)
    return scales.float(), mins.float()


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    # 128 bytes -> 8 sub-blocks of 32: each 32-byte chunk gives its low nibbles, then its high ones.
    chunks = qs.to(torch.int32).reshape(-1, 4, 1, 32)
    return torch.cat([chunks & 0xF, chunks >> 4], dim=2).reshape(-1, 8, 32)


def _dequantize_q4_k(blocks: torch.Tensor) -> torch.Tensor:
    # 144 bytes: f16 d, f16 dmin, 12 bytes of scales/mins, 128 bytes of nibbles; d*sc*q - dmin*m.
    scales, mins = _k4_scales_mins(blocks[:, 4:16])
    q = _nibbles(blocks[:, 16:144]).float()
    d, dmin = _f16(blocks, 0)[:, None, None], _f16(blocks, 2)[:, None, None]
    return (d * scales[..., None] * q - dmin * mins[..., None]).reshape(-1, 256)


def _dequantize_q5_k(blocks: torch.Tensor) -> torch.Tensor:
    # 176 bytes: as Q4_K, with 32 bytes of fifth bits before the nibbles (bit j of byte l: sub-block j).
    scales, mins = _k4_scales_mins(blocks[:, 4:16])
    qh = blocks[:, 16:48].to(torch.int32)[:, None, :]
    fifth = (qh >> torch.arange(8, device=blocks.device)[None, :, None]) & 1
    q = (_nibbles(blocks[:, 48:176]) | (fifth << 4)).float()
    d, dmin = _f16(blocks, 0)[:, None, None], _f16(blocks, 2)[:, None, None]
    return (d * scales[..., None] * q - dmin * mins[..., None]).reshape(-1, 256)


def _dequantize_q6_k(blocks: torch.Tensor) -> torch.Tensor:
    # 210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales (one per 16 values), f16 d.
    # Per 128-value half h and quarter k: low nibble of byte [h, k % 2, l] (high nibble for k >= 2),
    # bits 2k..2k+1 of qh[h, l]; value d * scale[h, 2k + l // 16] * (q - 32).
    ql = blocks[:, 0:128].to(torch.int32).reshape(-1, 2, 2, 32)
    qh = blocks[:, 128:192].to(torch.int32).reshape(-1, 2, 1, 32)
    low = torch.cat([ql & 0xF, ql >> 4], dim=2)
    high = (qh >> (2 * torch.arange(4, device=blocks.device))[None, None, :, None]) & 3
    q = ((low | (high << 4)) - 32).float()
    scales = blocks[:, 192:208].contiguous().view(torch.int8).float().reshape(-1, 2, 4, 2)
    scales = scales.repeat_interleave(16, dim=3)
    return (_f16(blocks, 208)[:, None, None, None] * scales * q).reshape(-1, 256)


# ggml block types dequantized in torch on the weight's device: block bytes -> (blocks, values) float32.
_TORCH_DEQUANTIZERS = {
    GGMLQuantizationType.Q4_K: _dequantize_q4_k,
    GGMLQuantizationType.Q5_K: _dequantize_q5_k,
    GGMLQuantizationType.Q6_K: _dequantize_q6_k,
}


def dequantize(weight: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The full-precision value of `weight` in `dtype` (a plain tensor is only cast)."""
    if not isinstance(weight, GGUFTensor):
        return weight.to(dtype)
    raw = weight.raw
    if weight.qtype == GGMLQuantizationType.Q8_0:
        return _dequantize_q8_0(raw, weight.logical_shape, dtype)
    if weight.qtype in PLAIN_QTYPES:
        return raw.view(PLAIN_QTYPES[weight.qtype]).reshape(weight.logical_shape).to(dtype)
    if weight.qtype in _TORCH_DEQUANTIZERS and raw.device.type != "cpu":
        return torch_dequantize(weight, dtype)
    values = gguf_quants.dequantize(raw.cpu().numpy(), weight.qtype)
    return torch.from_numpy(np.ascontiguousarray(values)).to(raw.device, dtype).reshape(weight.logical_shape)


def torch_dequantize(weight: GGUFTensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A K-quant weight dequantized in torch on its own device (what `dequantize` uses off the CPU;
    on the CPU the gguf package's numpy code is several times faster, measured on 4096x4096)."""
    _, type_size = GGML_QUANT_SIZES[weight.qtype]
    values = _TORCH_DEQUANTIZERS[weight.qtype](weight.raw.reshape(-1, type_size))
    return values.to(dtype).reshape(weight.logical_shape)


def quantize(value: torch.Tensor, qtype: GGMLQuantizationType | str) -> torch.Tensor:
    """`value` in ggml type `qtype`: a `GGUFTensor` for block types, a plain tensor for F32/F16/BF16
    (through the gguf package's own rounding, so the result is byte-identical to what it writes)."""
    qt = qtype_named(qtype) if isinstance(qtype, str) else qtype
    if qt in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        return value.to(PLAIN_QTYPES[qt])
    array = value.detach().to(torch.float32).cpu().numpy()
    try:
        blocks = gguf_quants.quantize(array, qt)
    except NotImplementedError:
        raise ValueError(
            f"the gguf package cannot quantize to {qt.name}; writable types: {list(WRITABLE_QTYPES)}"
        ) from None
    raw = torch.from_numpy(np.ascontiguousarray(blocks).view(np.uint8))
    if qt == GGMLQuantizationType.BF16:
        return raw.view(torch.bfloat16).reshape(value.shape)
    return GGUFTensor(raw, qt, tuple(value.shape))


class GGUFLinear(nn.Linear):
    """A Linear whose weight may be a `GGUFTensor`: dequantized to the input dtype per call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, dequantize(self.weight, x.dtype), bias)


def prepare_gguf(module: nn.Module, state_dict: dict[str, torch.Tensor], dtype: torch.dtype) -> list[str]:
    """Make `module` (on the meta device) take the quantized tensors of `state_dict` as they are.

    Every Linear whose weight arrives quantized becomes a `GGUFLinear`; a quantized tensor anywhere
    else (not a Linear weight) is dequantized to `dtype` in `state_dict` now. Returns the names of
    the Linears that keep quantized weights.
    """
    quantized_keys = {k: v.qtype.name for k, v in state_dict.items() if isinstance(v, GGUFTensor)}
    kept = use_gguf_linears(module, quantized_keys)
    for key in quantized_keys:
        if key.rpartition(".")[0] not in kept:
            state_dict[key] = dequantize(state_dict[key], dtype)
    return kept


def use_gguf_linears(module: nn.Module, qtypes: Mapping[str, str]) -> list[str]:
    """Turn every Linear of `module` whose `weight` is among the quantized keys `qtypes` into a
    `GGUFLinear` (class swap only, as fp8-cast does); returns their names."""
    kept: list[str] = []
    for key in qtypes:
        owner_name, _, leaf = key.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        if leaf == "weight" and isinstance(owner, nn.Linear):
            owner.__class__ = GGUFLinear
            # `load_state_dict(assign=True)` wraps the bytes in a Parameter with the meta weight's
            # requires_grad, and integer tensors cannot require gradients.
            owner.weight.requires_grad_(False)
            kept.append(owner_name)
    return sorted(kept)


def refuse_quantized_target(key: str, qtype: str) -> None:
    """LoRA fusion into a weight stored in the ggml block type `qtype` is refused (see the module docstring)."""
    raise ValueError(
        f"a LoRA cannot be fused into {key!r}: it is stored {qtype}-quantized in a GGUF file; "
        "use the bf16 checkpoint with the LoRA, or convert the LoRA-fused model to GGUF"
    )
