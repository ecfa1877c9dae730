"""Device and dtype helpers shared by models and pipelines."""

from __future__ import annotations

import importlib
import os

import torch

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def default_device() -> torch.device:
    """CUDA when present, then Apple MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_device(device: str | torch.device | None) -> torch.device:
    return default_device() if device is None else torch.device(device)


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """'bf16' / 'bfloat16' / torch.bfloat16 -> torch.bfloat16; raises naming the accepted values."""
    if isinstance(name, torch.dtype):
        return name
    try:
        return _DTYPES[name.lower()]
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r}; accepted: {sorted(_DTYPES)}") from None


def available_memory(device: torch.device) -> int | None:
    """Bytes a decode may still allocate: CUDA's free memory, or the host's available RAM on CPU / MPS
    (MPS shares the host memory). None where it cannot be read."""
    if device.type == "cuda" and torch.cuda.is_available():
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # elsewhere (macOS): psutil, which accelerate already installs, when it is importable
        psutil = importlib.import_module("psutil")
        return int(psutil.virtual_memory().available)
    except (ImportError, AttributeError, OSError):
        pass
    if hasattr(os, "sysconf") and "SC_AVPHYS_PAGES" in os.sysconf_names:  # free pages only (no cache)
        try:
            return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError):
            return None
    return None
