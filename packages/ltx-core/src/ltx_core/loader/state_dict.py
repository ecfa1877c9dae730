"""Lazily reading the tensors a rule set selects from one or more safetensors files."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import safe_open

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.loader.sd_ops import SDOps

logger = logging.getLogger(__name__)

StateDict = dict[str, torch.Tensor]


def _as_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def selected_keys(paths: str | Path | Sequence[str | Path], ops: SDOps) -> dict[str, str]:
    """Map file key -> module key for every key `ops` selects, without reading any tensor."""
    out: dict[str, str] = {}
    for path in _as_paths(paths):
        for key in read_safetensors_header(path).tensors:
            module_key = ops.rename(key)
            if module_key is not None:
                out[key] = module_key
    return out


# safetensors dtype names of the floating formats a weight can be rounded to.
_FLOAT_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}


def stored_float_dtypes(paths: str | Path | Sequence[str | Path], ops: SDOps) -> dict[str, torch.dtype]:
    """Module key -> the dtype the file stores it in, for every 16/32/64-bit float tensor `ops`
    selects (read from the headers only)."""
    out: dict[str, torch.dtype] = {}
    for path in _as_paths(paths):
        for key, info in read_safetensors_header(path).tensors.items():
            module_key = ops.rename(key)
            if module_key is not None and info.dtype in _FLOAT_DTYPES:
                out[module_key] = _FLOAT_DTYPES[info.dtype]
    return out


def load_state_dict(
    paths: str | Path | Sequence[str | Path],
    ops: SDOps,
    *,
    dtype: torch.dtype | None = None,
) -> StateDict:
    """Read, on the CPU, only the tensors `ops` selects; rename them and cast floating ones to `dtype`.

    Non-floating tensors (integer buffers) keep their stored dtype.
    """
    state_dict: StateDict = {}
    for path in _as_paths(paths):
        header = read_safetensors_header(path)
        wanted = [(k, ops.rename(k)) for k in header.tensors]
        wanted = [(k, m) for k, m in wanted if m is not None]
        if not wanted:
            continue
        with safe_open(str(header.path), framework="pt", device="cpu") as f:
            for file_key, _ in wanted:
                tensor = f.get_tensor(file_key)
                for key, value in ops.translate(file_key, tensor):
                    if dtype is not None and value.is_floating_point():
                        value = value.to(dtype)
                    if key in state_dict:
                        raise CheckpointError(f"{str(path)!r}: two tensors map to the module key {key!r} ({ops.name})")
                    state_dict[key] = value
    logger.debug("loaded %d tensors with rules %s", len(state_dict), ops.name)
    return state_dict
