"""GGUF as one more weight-file kind: its tensor index in the safetensors header's shape, its tensors
as plain tensors (F32/F16/BF16) or `GGUFTensor`s (block-quantized types, kept quantized).

Names: the tensors keep the reference's key layout (`model.diffusion_model.transformer_blocks.0...`),
so the component rules select them as they select a safetensors file's keys. A file whose keys carry
no prefix (`transformer_blocks.0...`: ComfyUI-GGUF's converter strips `model.diffusion_model.` from
diffusion models) is read as if they had it.

Config: GGUF has no safetensors `__metadata__`; its string key-value fields outside the GGUF
namespaces (`general.*`, `gguf.*`, `tokenizer.*`) are read as that metadata (so a `config` field
holds the same JSON the released file's `config` entry holds; `to-gguf` writes it that way). A
file without one takes its config from a companion file (`ComponentSource.config_file`): see
`ModelFiles.split`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_index import SafetensorsHeader, TensorInfo

GGUF_MAGIC = b"GGUF"
# Field namespaces of the GGUF format and llama.cpp, never LTX metadata.
_RESERVED_PREFIXES = ("general.", "gguf.", "tokenizer.", "GGUF.")
# The field `to-gguf` records the ggml type of the file's big weights in (informative only).
QTYPE_FIELD = "ltx.qtype"


def is_gguf(path: str | Path) -> bool:
    try:
        with Path(path).open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _reader(path: Path) -> Any:
    from gguf import GGUFReader

    try:
        return GGUFReader(path, "r")
    except (ValueError, OSError, IndexError) as e:
        raise CheckpointError(f"{str(path)!r} is not a readable GGUF file ({e})") from None


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


_TRANSFORMER_PREFIX = "model.diffusion_model."
_BARE_TRANSFORMER_MARK = "transformer_blocks."


def _released_names(names: list[str]) -> dict[str, str]:
    """File name -> the released key name (the transformer prefix restored on bare diffusion-model files)."""
    bare = not any(n.startswith(_TRANSFORMER_PREFIX) for n in names) and any(
        n.startswith(_BARE_TRANSFORMER_MARK) for n in names
    )
    return {n: f"{_TRANSFORMER_PREFIX}{n}" if bare else n for n in names}


def read_gguf_header(path: Path) -> SafetensorsHeader:
    """The tensor index (ggml type names as dtypes, logical shapes, absolute byte ranges) and the
    LTX metadata fields of a GGUF file."""
    reader = _reader(path)
    names = _released_names([t.name for t in reader.tensors])
    tensors = {
        names[t.name]: TensorInfo(
            dtype=t.tensor_type.name,
            shape=tuple(int(d) for d in reversed(t.shape.tolist())),
            data_offsets=(int(t.data_offset), int(t.data_offset) + int(t.n_bytes)),
        )
        for t in reader.tensors
    }
    metadata = {
        name: _decode(field.contents())
        for name, field in reader.fields.items()
        if not name.startswith(_RESERVED_PREFIXES) and isinstance(field.contents(), str)
    }
    return SafetensorsHeader(path=path, tensors=tensors, metadata=metadata)


def read_gguf_tensors(path: Path, keys: set[str] | None = None) -> dict[str, torch.Tensor]:
    """The tensors named in `keys` (all when None), copied out of the file: F32/F16/BF16/integer
    ones as plain tensors, block-quantized ones as `GGUFTensor`s."""
    from ltx_core.quantization.gguf import PLAIN_QTYPES, GGUFTensor

    out: dict[str, torch.Tensor] = {}
    reader = _reader(path)
    names = _released_names([t.name for t in reader.tensors])
    for t in reader.tensors:
        name = names[t.name]
        if keys is not None and name not in keys:
            continue
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        raw = torch.from_numpy(np.array(t.data, copy=True).view(np.uint8))
        if t.tensor_type in PLAIN_QTYPES:
            out[name] = raw.reshape(-1).view(PLAIN_QTYPES[t.tensor_type]).reshape(shape)
        else:
            try:
                out[name] = GGUFTensor(raw.reshape(*shape[:-1], -1), t.tensor_type, shape)
            except ValueError as e:
                raise CheckpointError(f"{str(path)!r}: tensor {t.name!r}: {e}") from None
    return out


# The architecture name ComfyUI-GGUF gives LTX-Video files (GGUF requires one).
GGUF_ARCHITECTURE = "ltxv"
# Tensors with fewer values than this stay unquantized (ComfyUI-GGUF keeps small ones in float too):
# quantizing them saves nothing and costs their precision.
MIN_QUANTIZED_NUMEL = 1024


def gguf_storage(key: str, value: torch.Tensor, qtype: str, min_quantized_numel: int = MIN_QUANTIZED_NUMEL) -> str:
    """The ggml type `to-gguf` stores `key` in: `qtype` for 2-D weights of enough values whose rows
    fill whole blocks, otherwise the plain type of the stored value (F32/F16/BF16, never narrower)."""
    from gguf import GGML_QUANT_SIZES

    from ltx_core.quantization.gguf import qtype_named

    stored = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}.get(value.dtype, "F32")
    block, _ = GGML_QUANT_SIZES[qtype_named(qtype)]
    big_matrix = key.endswith(".weight") and value.ndim == 2 and value.numel() >= min_quantized_numel
    if big_matrix and value.shape[-1] % block == 0:
        return qtype
    return stored


def write_gguf(
    out_path: Path,
    tensors: dict[str, torch.Tensor],
    metadata: dict[str, Any],
    qtype: str,
    *,
    min_quantized_numel: int = MIN_QUANTIZED_NUMEL,
    architecture: str = GGUF_ARCHITECTURE,
    fields: Callable[[Any], None] | None = None,
) -> dict[str, str]:
    """Write `tensors` (released key names) to the GGUF file `out_path` (which must not exist yet:
    the caller writes to a temporary name); each metadata entry becomes a string field of its own
    (JSON for non-strings), and `fields(writer)` may add typed ones (a Gemma's llama.cpp fields).
    A `GGUFTensor` value is written as the blocks it holds. Returns key -> the ggml type it was stored in."""
    from gguf import GGUFWriter

    from ltx_core.quantization.gguf import GGUFTensor, qtype_named, quantize

    writer = GGUFWriter(str(out_path), architecture)
    for name, value in metadata.items():
        writer.add_string(name, value if isinstance(value, str) else json.dumps(value))
    writer.add_string(QTYPE_FIELD, qtype)
    if fields is not None:
        fields(writer)
    stored: dict[str, str] = {}
    for key, value in tensors.items():
        if isinstance(value, GGUFTensor):
            # Blocks quantized elsewhere (e.g. K-quants, which the gguf package cannot make) go in as they are.
            kind, q = value.qtype.name, value
        else:
            kind = gguf_storage(key, value, qtype, min_quantized_numel)
            q = quantize(value, kind) if kind != "F32" else value.to(torch.float32)
        stored[key] = kind
        if isinstance(q, GGUFTensor):
            writer.add_tensor(key, q.raw.numpy(), raw_dtype=qtype_named(kind))
        elif q.dtype == torch.bfloat16:
            raw = q.contiguous().view(torch.uint8).numpy()
            writer.add_tensor(key, raw, raw_dtype=qtype_named("BF16"))
        else:
            writer.add_tensor(key, q.contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return stored
