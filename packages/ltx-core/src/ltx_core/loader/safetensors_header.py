"""Reading a safetensors file's header (tensor index and metadata) without touching tensor data."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_index import SafetensorsHeader, TensorInfo
from ltx_core.loader.gguf_file import is_gguf, read_gguf_header

# A header larger than this is not a sane safetensors header (the 22B file's is ~1 MB).
_MAX_HEADER_BYTES = 256 * 1024 * 1024


def _decode_metadata_value(value: str) -> Any:
    try:
        return json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return value


def check_checkpoint_path(path: str | Path) -> Path:
    """Return `path` as a Path, raising a clear error when it is not an existing file."""
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"checkpoint file not found: {str(p)!r}")
    if not p.is_file():
        raise CheckpointError(f"checkpoint path is not a file: {str(p)!r} (expected a .safetensors file)")
    return p


def read_safetensors_header(path: str | Path) -> SafetensorsHeader:
    """Parse the JSON header of a safetensors file (or the tensor index of a GGUF file), validating its framing.

    Only the first 8 + header-length bytes are read, so this is cheap for a 46 GB file.
    """
    p = check_checkpoint_path(path)
    if is_gguf(p):
        # GGUF is one more weight-file kind, indexed in the same shape (see `gguf_file`).
        return read_gguf_header(p)
    file_size = p.stat().st_size
    with p.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{str(p)!r} is not a safetensors file: it is only {file_size} bytes long")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len == 0 or header_len > _MAX_HEADER_BYTES or 8 + header_len > file_size:
            raise CheckpointError(
                f"{str(p)!r} is not a safetensors file or is truncated: header length {header_len} "
                f"does not fit in a file of {file_size} bytes"
            )
        raw = f.read(header_len)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{str(p)!r} is not a safetensors file: its header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{str(p)!r} is not a safetensors file: its header is not a JSON object")

    raw_meta = header.pop("__metadata__", None) or {}
    data_size = file_size - 8 - header_len
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        try:
            info = TensorInfo(
                dtype=str(entry["dtype"]),
                shape=tuple(int(d) for d in entry["shape"]),
                data_offsets=(int(entry["data_offsets"][0]), int(entry["data_offsets"][1])),
            )
        except (KeyError, TypeError, ValueError, IndexError):
            raise CheckpointError(f"{str(p)!r}: malformed header entry for tensor {name!r}") from None
        if info.data_offsets[1] > data_size:
            raise CheckpointError(
                f"{str(p)!r} is truncated: tensor {name!r} ends at byte {info.data_offsets[1]} "
                f"of a data section of {data_size} bytes"
            )
        tensors[name] = info
    metadata = {k: _decode_metadata_value(v) for k, v in raw_meta.items()}
    return SafetensorsHeader(path=p, tensors=tensors, metadata=metadata)


def read_metadata(path: str | Path) -> dict[str, Any]:
    return read_safetensors_header(path).metadata


