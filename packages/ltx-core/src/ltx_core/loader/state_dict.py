"""Lazily reading the tensors a rule set selects from one or more safetensors files."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from safetensors import safe_open

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.file_index import SafetensorsHeader
from ltx_core.loader.gguf_file import is_gguf, read_gguf_tensors
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.loader.sd_ops import SDOps

logger = logging.getLogger(__name__)

StateDict = dict[str, torch.Tensor]

# A layout may store one module tensor as several (diffusers splits fused q/k/v projections into three
# Linears): its key translation names each piece `<module key>#<index>/<count>`, and loading joins the
# pieces, in index order along dim 0, into the module key.
_PIECE_MARK = "#"


def piece_key(key: str, index: int, count: int) -> str:
    """The name a key translation gives piece `index` (of `count`) of the tensor `key`."""
    return f"{key}{_PIECE_MARK}{index}/{count}"


def whole_key(key: str) -> str:
    """The module key a piece belongs to (`key` itself when it names no piece)."""
    return key.split(_PIECE_MARK, 1)[0]


def join_pieces(state_dict: StateDict) -> StateDict:
    """Concatenate every tensor stored in pieces (see `piece_key`) into its module key; a missing or
    repeated piece is an error naming the key."""
    pieces: dict[str, dict[int, torch.Tensor]] = {}
    counts: dict[str, int] = {}
    out: StateDict = {}
    for key, value in state_dict.items():
        if _PIECE_MARK not in key:
            out[key] = value
            continue
        whole, _, place = key.partition(_PIECE_MARK)
        index, _, count = place.partition("/")
        pieces.setdefault(whole, {})[int(index)] = value
        if counts.setdefault(whole, int(count)) != int(count):
            raise CheckpointError(f"the pieces of {whole!r} disagree on their number ({counts[whole]} vs {count})")
    for whole, parts in pieces.items():
        if sorted(parts) != list(range(counts[whole])):
            held = sorted(parts)
            raise CheckpointError(f"{whole!r} is stored in {counts[whole]} pieces, the files hold pieces {held}")
        if whole in out:
            raise CheckpointError(f"{whole!r} is stored both whole and in pieces")
        out[whole] = torch.cat([parts[i] for i in range(counts[whole])], dim=0)
    return out


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


FileReads = Sequence[tuple[Path, SDOps]]
"""Files, each with the rules its keys go through (`ComponentSource.reads`)."""


def stored_float_dtypes(paths: str | Path | Sequence[str | Path], ops: SDOps) -> dict[str, torch.dtype]:
    """Module key -> the dtype the file stores it in, for every 16/32/64-bit float tensor `ops`
    selects (read from the headers only)."""
    return stored_float_dtypes_of([(p, ops) for p in _as_paths(paths)])


def _header(path: Path, headers: FileHeaders | None) -> SafetensorsHeader:
    """`path`'s header: through the store of the files' set when there is one (read once), else from disk."""
    return headers.header(path) if headers is not None else read_safetensors_header(path)


def stored_float_dtypes_of(reads: FileReads, *, headers: FileHeaders | None = None) -> dict[str, torch.dtype]:
    """`stored_float_dtypes` over files read with rules of their own (headers through `headers` when given)."""
    out: dict[str, torch.dtype] = {}
    for path, ops in reads:
        for key, info in _header(path, headers).tensors.items():
            module_key = ops.rename(key)
            if module_key is not None and info.dtype in _FLOAT_DTYPES:
                out[whole_key(module_key)] = _FLOAT_DTYPES[info.dtype]
    return out


def load_state_dict(
    paths: str | Path | Sequence[str | Path],
    ops: SDOps,
    *,
    dtype: torch.dtype | None = None,
) -> StateDict:
    """Read, on the CPU, only the tensors `ops` selects; rename them and cast floating ones to `dtype`.

    Non-floating tensors (integer buffers) keep their stored dtype. Tensors the translation names as
    pieces (`piece_key`) are joined into their module key.
    """
    return load_files([(p, ops) for p in _as_paths(paths)], dtype=dtype)


def _add_translated(
    state_dict: StateDict, items: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype | None, path: Path, ops: SDOps
) -> None:
    # GGUF block-quantized tensors are uint8, so they stay quantized here (see `quantization.gguf`).
    for key, value in items:
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
        if key in state_dict:
            raise CheckpointError(f"{str(path)!r}: two tensors map to the module key {key!r} ({ops.name})")
        state_dict[key] = value


def load_files(reads: FileReads, *, dtype: torch.dtype | None = None, headers: FileHeaders | None = None) -> StateDict:
    """`load_state_dict` over files read with rules of their own (one component spread over files); each
    file's tensor index through `headers` when given (the store of the set the files belong to)."""
    state_dict: StateDict = {}
    for path, ops in reads:
        header = _header(path, headers)
        wanted = [(k, ops.rename(k)) for k in header.tensors]
        wanted = [(k, m) for k, m in wanted if m is not None]
        if not wanted:
            continue
        if is_gguf(header.path):
            gguf_tensors = read_gguf_tensors(header.path, {k for k, _ in wanted})
            for file_key, _ in wanted:
                _add_translated(state_dict, ops.translate(file_key, gguf_tensors.pop(file_key)), dtype, path, ops)
            continue
        with safe_open(str(header.path), framework="pt", device="cpu") as f:
            for file_key, _ in wanted:
                _add_translated(state_dict, ops.translate(file_key, f.get_tensor(file_key)), dtype, path, ops)
    logger.debug("loaded %d tensors with rules %s", len(state_dict), sorted({ops.name for _, ops in reads}))
    return join_pieces(state_dict)
