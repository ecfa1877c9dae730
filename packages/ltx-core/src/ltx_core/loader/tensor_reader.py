"""Reading single tensors of a safetensors file with plain file reads (no memory map).

Block streaming and tensor-by-tensor loading read a few tensors at a time from a file that may be far
larger than the host memory. A memory map would leave every page it touched resident in the process
(and counted in its RSS) until the map is closed; `pread`-style reads into a fresh buffer keep the
host footprint at the tensors in flight.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Union

import torch

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_index import SafetensorsHeader, TensorInfo
from ltx_core.loader.gguf_file import is_gguf
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.quantization.gguf import is_block_qtype, quantized

SAFETENSORS_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def torch_dtype(info: TensorInfo, *, path: str | Path = "", key: str = "") -> torch.dtype:
    try:
        return SAFETENSORS_DTYPES[info.dtype]
    except KeyError:
        raise CheckpointError(
            f"{str(path)!r}: tensor {key!r} has dtype {info.dtype!r}; readable: {sorted(SAFETENSORS_DTYPES)}"
        ) from None


class TensorReader:
    """Reads one tensor at a time from a safetensors file; one instance per thread (it owns a file handle)."""

    def __init__(self, path: str | Path, header: SafetensorsHeader | None = None) -> None:
        self.header = header if header is not None else read_safetensors_header(path)
        self.path = Path(self.header.path)
        self._fd = os.open(self.path, os.O_RDONLY)
        if is_gguf(self.path):
            # A GGUF index (`gguf_file`) holds absolute offsets and ggml type names.
            self._data_start = 0
        else:
            (header_len,) = struct.unpack("<Q", os.pread(self._fd, 8, 0))
            self._data_start = 8 + header_len

    def info(self, key: str) -> TensorInfo:
        return self.header.tensors[key]

    def nbytes(self, key: str) -> int:
        start, end = self.info(key).data_offsets
        return end - start

    def read_into(self, key: str, out: torch.Tensor) -> torch.Tensor:
        """Read the raw bytes of `key` into the contiguous CPU uint8 tensor `out`; returns a typed view."""
        info = self.info(key)
        self.read_raw_into(key, out)
        return out.view(torch_dtype(info, path=self.path, key=key)).reshape(info.shape)

    def read_raw_into(self, key: str, out: torch.Tensor) -> torch.Tensor:
        """Read the raw bytes of `key` into the contiguous CPU uint8 tensor `out`; returns `out`."""
        info = self.info(key)
        start, end = info.data_offsets
        if out.numel() != end - start or out.dtype != torch.uint8 or not out.is_contiguous():
            raise ValueError(f"buffer for {key!r} must be {end - start} contiguous uint8 bytes, got {tuple(out.shape)}")
        view = memoryview(out.numpy()).cast("B")
        done = 0
        while done < len(view):
            n = os.preadv(self._fd, [view[done:]], self._data_start + start + done)
            if n <= 0:
                raise CheckpointError(f"{str(self.path)!r}: unexpected end of file while reading {key!r}")
            done += n
        return out

    def read(self, key: str) -> torch.Tensor:
        """A freshly allocated CPU tensor holding `key` (a `GGUFTensor` for a ggml block type)."""
        info = self.info(key)
        if info.dtype not in SAFETENSORS_DTYPES and is_block_qtype(info.dtype):
            raw = self.read_raw_into(key, torch.empty(self.nbytes(key), dtype=torch.uint8))
            return quantized(raw.reshape(*info.shape[:-1], -1), info.dtype, info.shape)
        return self.read_into(key, torch.empty(self.nbytes(key), dtype=torch.uint8))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TensorReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class ShardedTensorReader:
    """`TensorReader`'s interface over the shards of one model (a Hugging Face folder's
    `model-0000N-of-0000M.safetensors`): each key is read from the shard that holds it."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self._readers = [TensorReader(p) for p in paths]
        owner: dict[str, TensorReader] = {}
        tensors: dict[str, TensorInfo] = {}
        for reader in self._readers:
            for key, info in reader.header.tensors.items():
                if key in owner:
                    raise CheckpointError(
                        f"{key!r} is stored in both {str(owner[key].path)!r} and {str(reader.path)!r}"
                    )
                owner[key] = reader
                tensors[key] = info
        self._owner = owner
        self.path = self._readers[0].path
        # Offsets in this merged index are per shard: only the owning reader interprets them.
        self.header = SafetensorsHeader(path=self.path, tensors=tensors, metadata={})

    def info(self, key: str) -> TensorInfo:
        return self.header.tensors[key]

    def nbytes(self, key: str) -> int:
        return self._owner[key].nbytes(key)

    def read_into(self, key: str, out: torch.Tensor) -> torch.Tensor:
        return self._owner[key].read_into(key, out)

    def read_raw_into(self, key: str, out: torch.Tensor) -> torch.Tensor:
        return self._owner[key].read_raw_into(key, out)

    def read(self, key: str) -> torch.Tensor:
        return self._owner[key].read(key)

    def close(self) -> None:
        for reader in self._readers:
            reader.close()

    def __enter__(self) -> ShardedTensorReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


WeightFiles = Union[str, Path, Sequence[Union[str, Path]]]  # noqa: UP007 - a runtime alias on Python 3.10
"""One weight file, or the shards of one model."""


def open_tensor_reader(files: WeightFiles) -> TensorReader | ShardedTensorReader:
    """A reader of one file, or of every shard when `files` is a sequence of several."""
    if isinstance(files, (str, Path)):
        return TensorReader(files)
    paths = list(files)
    if not paths:
        raise ValueError("no weight files to read")
    return TensorReader(paths[0]) if len(paths) == 1 else ShardedTensorReader(paths)
