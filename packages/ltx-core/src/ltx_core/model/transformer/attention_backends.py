"""Attention kernels behind one call signature, chosen per call.

`attend(q, k, v, heads, mask)` takes (B, T, heads * head_dim) tensors. PyTorch SDPA is the default
and the only backend for masked calls (the flash kernels take no additive mask). Without a mask,
FlashAttention 3 (`flash_attn_interface`, Hopper) or 4 (`flash_attn.cute`, Hopper/Blackwell) run
on CUDA half-precision inputs when installed, and Apple's `mps_sdpa` on MPS. The optional kernels
are probed once at import; a missing or broken install simply leaves SDPA in charge of automatic
selection, while a backend chosen by name (`check_backend`, `set_attention_backend`: "sdpa",
"flash3", "flash4", "mps-sdpa"; None or "auto" = automatic) fails with an error naming what it needs.
The backend that runs is logged once per (backend, device).

On the CPU, SDPA's own kernel (its flash kernel or the math one) is chosen by timing both once per
head count, head dim, length class and dtype (`ltx_core.tune`, op kind "sdpa") when the model owns
kernel choices; the other is taken where the preferred one cannot serve a call.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from enum import Enum

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from ltx_core.runtime_choices import ACCEPTED_BACKEND_NAMES
from ltx_core.tune import KernelChoices, OpKey, size_class

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


# Names a caller (the `--attention-backend` flag) may use; None / "auto" means per-device automatic.
BACKEND_NAMES: dict[str, AttentionBackend] = {
    "sdpa": AttentionBackend.SDPA,
    "flash3": AttentionBackend.FLASH_ATTENTION_3,
    "flash_attention_3": AttentionBackend.FLASH_ATTENTION_3,
    "flash4": AttentionBackend.FLASH_ATTENTION_4,
    "flash_attention_4": AttentionBackend.FLASH_ATTENTION_4,
    "mps-sdpa": AttentionBackend.MPS_SDPA,
    "mps_sdpa": AttentionBackend.MPS_SDPA,
}

# What each optional backend needs: the package that provides it and the devices it serves.
_REQUIREMENTS = {
    AttentionBackend.FLASH_ATTENTION_3: (
        "flash_attn_interface (FlashAttention 3)",
        "a CUDA GPU of compute capability 9.x",
    ),
    AttentionBackend.FLASH_ATTENTION_4: (
        "flash_attn.cute (FlashAttention 4)",
        "a CUDA GPU of compute capability 9.x or 10.x",
    ),
    AttentionBackend.MPS_SDPA: ("mps_sdpa", "an Apple MPS device"),
}


def available_backends() -> tuple[AttentionBackend, ...]:
    found = [AttentionBackend.SDPA]
    if _fa3_func is not None:
        found.append(AttentionBackend.FLASH_ATTENTION_3)
    if _fa4_func is not None:
        found.append(AttentionBackend.FLASH_ATTENTION_4)
    if _mps_sdpa_func is not None:
        found.append(AttentionBackend.MPS_SDPA)
    return tuple(found)


def parse_backend(name: str | AttentionBackend | None) -> AttentionBackend | None:
    """'flash3' -> FLASH_ATTENTION_3, None / 'auto' -> None (automatic); raises naming the accepted names."""
    if name is None or isinstance(name, AttentionBackend):
        return name
    if name.lower() == "auto":
        return None
    try:
        return BACKEND_NAMES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown attention backend {name!r}; accepted: {', '.join(ACCEPTED_BACKEND_NAMES)}") from None


def _serves_device(backend: AttentionBackend, device: torch.device) -> bool:
    if backend is AttentionBackend.SDPA:
        return True
    if backend is AttentionBackend.MPS_SDPA:
        return device.type == "mps"
    if device.type != "cuda" or not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability(device)
    return major == 9 if backend is AttentionBackend.FLASH_ATTENTION_3 else major in (9, 10)


def check_backend(backend: str | AttentionBackend | None, device: torch.device | str) -> AttentionBackend | None:
    """Validate a chosen backend for `device` before any heavy work: raises when it is not installed
    or cannot serve that device, naming what it needs and what is available."""
    chosen = parse_backend(backend)
    if chosen is None or chosen is AttentionBackend.SDPA:
        return chosen
    device = torch.device(device)
    package, hardware = _REQUIREMENTS[chosen]
    # The name as the user gave it (`flash3`), with the backend it stands for.
    named = repr(chosen.value) if not isinstance(backend, str) else f"{backend!r} ({chosen.value})"
    usable = ", ".join(b.value for b in available_backends())
    if chosen not in available_backends():
        raise ValueError(
            f"attention backend {named} needs the package {package}, which is not installed "
            f"(or failed to import); installed backends: {usable}, or 'auto'"
        )
    if not _serves_device(chosen, device):
        raise ValueError(
            f"attention backend {named} needs {hardware}; this run uses {device}. Use 'sdpa' or 'auto' instead"
        )
    return chosen


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


def _resolve(q: torch.Tensor, heads: int, masked: bool, pinned: AttentionBackend | None) -> AttentionBackend:
    """A pinned backend serves every call it can; masked calls (and flash kernels' unsupported inputs)
    go to SDPA, since the flash kernels take no additive mask."""
    if pinned is None:
        return select_backend(q, heads, masked)
    if masked or pinned is AttentionBackend.SDPA:
        return AttentionBackend.SDPA
    if pinned is AttentionBackend.MPS_SDPA:
        return pinned
    if q.dtype not in _FLASH_DTYPES or q.shape[-1] // heads > _FLASH_MAX_HEAD_DIM:
        return AttentionBackend.SDPA
    return pinned


@functools.lru_cache(maxsize=64)
def _log_backend(backend: AttentionBackend, device_type: str, pinned: bool) -> None:
    # Cached so the log names each (backend, device) once instead of once per attention call.
    logger.info("attention backend: %s on %s (%s)", backend.value, device_type, "chosen" if pinned else "automatic")


def _heads_first(t: torch.Tensor, heads: int) -> torch.Tensor:
    b, n, width = t.shape
    return t.view(b, n, heads, width // heads).transpose(1, 2)


def _mask_4d(mask: torch.Tensor) -> torch.Tensor:
    if mask.ndim == 3:  # (B, T, S): the same bias for every head
        mask = mask.unsqueeze(1)
    if mask.ndim != 4:
        raise ValueError(f"attention bias must be (B, T, S) or (B, heads|1, T|1, S), got {tuple(mask.shape)}")
    return mask


# CPU SDPA kernels by kernel-path name; each list also allows math, which serves every input.
_CPU_SDPA_KERNELS = {"flash": [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH], "math": [SDPBackend.MATH]}


def cpu_sdpa_path(
    choices: KernelChoices, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None
) -> str:
    """ "flash" or "math" for a CPU SDPA call on (B, heads, T, head_dim) inputs, timed once per class.

    A call that autograd tracks (training) is timed forward and backward, under its own key: the
    kernels' backward passes differ more than their forward ones."""
    b, heads, t, dim = q.shape
    s = k.shape[2]
    training = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    masked = "masked" if attn_mask is not None else "plain"
    shape_class = f"h{heads}.d{dim}.q{size_class(t)}.k{size_class(s)}.{masked}" + (".train" if training else "")
    key = OpKey("sdpa", str(q.dtype).removeprefix("torch."), shape_class)
    sample = [x.detach() for x in (q, k, v)]
    mask = None if attn_mask is None else attn_mask.detach()

    def run(path: str) -> torch.Tensor:
        with sdpa_kernel(_CPU_SDPA_KERNELS[path]):
            if not training:
                return F.scaled_dot_product_attention(*sample, attn_mask=mask)
            with torch.enable_grad():  # the timer runs candidates without autograd
                leaves = [x.clone().requires_grad_() for x in sample]
                out = F.scaled_dot_product_attention(*leaves, attn_mask=mask)
                out.backward(torch.ones_like(out))
                return out.detach()

    candidates = {path: functools.partial(run, path) for path in _CPU_SDPA_KERNELS}
    work = 2.0 * b * heads * t * s * dim * (3 if training else 1)
    # A training call is inside the step's autograd graph (a gradient-checkpointed block above all): timing
    # there would record the candidates' own work in it, and the recompute, which finds the decision made,
    # would save other tensors than the forward did - autograd refuses the step (or crashes). Training
    # takes a decision made earlier (`python -m ltx_core.tune`), else the default.
    return choices.choose(key, candidates, default="flash", work=work, timeable=not training)


def sdpa_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    heads: int,
    mask: torch.Tensor | None = None,
    choices: KernelChoices | None = None,
) -> torch.Tensor:
    """PyTorch scaled-dot-product attention; `mask` is an additive bias broadcastable to (B, H, T, S).
    With `choices` on the CPU, SDPA's kernel is the one timed fastest there (`cpu_sdpa_path`)."""
    b, t, _ = q.shape
    attn_mask = None if mask is None else _mask_4d(mask).to(q.dtype)
    q4, k4, v4 = _heads_first(q, heads), _heads_first(k, heads), _heads_first(v, heads)
    if choices is None or q.device.type != "cpu" or torch.compiler.is_compiling():
        out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=attn_mask)
    else:
        with sdpa_kernel(_CPU_SDPA_KERNELS[cpu_sdpa_path(choices, q4, k4, v4, attn_mask)]):
            out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=attn_mask)
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
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    heads: int,
    mask: torch.Tensor | None = None,
    backend: AttentionBackend | None = None,
    choices: KernelChoices | None = None,
) -> torch.Tensor:
    """Multi-head attention on (B, T, heads * head_dim) inputs; `backend` None picks per device,
    `choices` picks SDPA's CPU kernel by timing (see `sdpa_attention`)."""
    chosen = _resolve(q, heads, mask is not None, backend)
    if not torch.compiler.is_compiling():
        _log_backend(chosen, q.device.type, backend is not None)
    if chosen is AttentionBackend.FLASH_ATTENTION_3:
        return _flash_attention(_fa3_func, q, k, v, heads)
    if chosen is AttentionBackend.FLASH_ATTENTION_4:
        return _flash_attention(_fa4_func, q, k, v, heads)
    if chosen is AttentionBackend.MPS_SDPA:
        return _mps_attention(q, k, v, heads)
    return sdpa_attention(q, k, v, heads, mask, choices)


def attention_function(backend: str | AttentionBackend | None, choices: KernelChoices | None = None) -> AttentionFn:
    """An `AttentionFn` pinned to `backend` (None / 'auto': automatic per device), with SDPA's CPU
    kernel chosen by `choices` (None: PyTorch's own choice)."""
    pinned = parse_backend(backend)
    if pinned is None and choices is None:
        return attend
    return functools.partial(attend, backend=pinned, choices=choices)


def with_kernel_choices(fn: AttentionFn, choices: KernelChoices | None) -> AttentionFn:
    """`fn` with its SDPA kernel chosen by `choices`, when `fn` is one of `attention_function`'s; other
    attention functions (sequence parallel's wrappers) are returned as they are."""
    if fn is attend:
        return attention_function(None, choices)
    if isinstance(fn, functools.partial) and fn.func is attend:
        return attention_function(fn.keywords.get("backend"), choices)
    return fn


def set_attention_backend(model: nn.Module, backend: str | AttentionBackend | None, device: torch.device | str) -> None:
    """Point every attention layer of `model` at `backend`, after checking it can run on `device`."""
    pinned = check_backend(backend, device)
    count = 0
    for module in model.modules():
        if hasattr(module, "attention_fn"):
            # Kernel choices the layer already has stay with it.
            module.attention_fn = attention_function(pinned, getattr(module, "kernel_choices", None))
            count += 1
    logger.info("attention backend %s set on %d attention layers", parse_backend(backend) or "auto", count)
