"""Loading a component tensor by tensor: read, fuse LoRA, convert, place on the device, one at a time.

`build_model` reads the whole state dict on the host first (fine for small components, and what the
state-dict cache shares between stages). For the 22B transformer that is a second full copy of the
model in host memory; here each tensor is read from the file, LoRA-fused, cast (to the run dtype or
to a quantized storage dtype) and moved to the device before the next one is read, so the host
peak is a small multiple of the largest tensor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.lora import LoraDeltas
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.state_dict import FileReads, StateDict, whole_key
from ltx_core.loader.tensor_reader import TensorReader
from ltx_core.quantization.gguf import GGUFTensor, refuse_quantized_target

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WeightConversion:
    """How one stored tensor becomes the tensor the module holds.

    Floating tensors go to `dtype`, except keys in `storage_dtypes` (quantized storage, e.g.
    float8), which are cast from their stored value straight to that dtype. LoRA deltas are fused
    with the `lora_rule` rounding (see `LoraDeltas`); into a quantized key, the bfloat16 delta is
    added to the stored value read back as bfloat16, and the sum is cast to the storage dtype.
    """

    dtype: torch.dtype
    storage_dtypes: Mapping[str, torch.dtype] = field(default_factory=dict)
    lora: LoraDeltas | None = None
    lora_rule: torch.dtype | None = None
    """The dtype LoRA deltas are rounded in; None: each weight's stored dtype (the reference's rule)."""

    def __call__(self, key: str, value: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
        device = value.device if device is None else device
        if isinstance(value, GGUFTensor):
            # GGUF blocks stay as stored (dequantized per call by GGUFLinear); a LoRA cannot be fused in.
            if self.lora is not None and key in self.lora:
                refuse_quantized_target(key, value.qtype.name)
            if key in self.storage_dtypes:
                raise ValueError(
                    f"{key!r} is GGUF-quantized ({value.qtype.name}); it cannot be stored again as "
                    f"{self.storage_dtypes[key]}: use --quantization none with a GGUF file"
                )
            return value.to(device)
        if not value.is_floating_point():
            return value.to(device)
        storage = self.storage_dtypes.get(key)
        rule = self._rule(storage, value.dtype)
        delta = self.lora.delta(key, tuple(value.shape), rule=rule, device=device) if self.lora else None
        if storage is not None:
            stored = value.to(device).to(storage)
            if delta is None:
                return stored
            return (stored.to(torch.bfloat16) + delta).to(storage)
        if delta is None:
            return value.to(device, self.dtype)
        return (value.to(device, delta.dtype) + delta).to(self.dtype)

    def is_identity(self, key: str, stored: torch.dtype) -> bool:
        """True when the stored bytes of `key` are already the module's tensor (no cast, no LoRA)."""
        if self.lora is not None and key in self.lora:
            return False
        target = self.storage_dtypes.get(key, self.dtype if stored.is_floating_point else stored)
        return target == stored

    def _rule(self, storage: torch.dtype | None, stored: torch.dtype) -> torch.dtype:
        if storage is not None:
            return torch.bfloat16
        return stored if self.lora_rule is None else self.lora_rule


def iter_tensors(
    reader: TensorReader, ops: SDOps, keep: Callable[[str], bool] | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """(module key, CPU tensor) for every key `ops` selects (and `keep` accepts), read one at a time."""
    for file_key in reader.header.tensors:
        module_key = ops.rename(file_key)
        if module_key is None or (keep is not None and not keep(module_key)):
            continue
        yield from ops.translate(file_key, reader.read(file_key))


def load_tensorwise(
    path: str | Path,
    ops: SDOps,
    conversion: WeightConversion,
    *,
    device: torch.device,
    keep: Callable[[str], bool] | None = None,
) -> StateDict:
    """The converted state dict on `device`, read and converted one tensor at a time."""
    return load_tensorwise_files([(Path(path), ops)], conversion, device=device, keep=keep)


def load_tensorwise_files(
    reads: FileReads,
    conversion: WeightConversion,
    *,
    device: torch.device,
    keep: Callable[[str], bool] | None = None,
) -> StateDict:
    """`load_tensorwise` over a component spread over files (shards), each read with its own rules.
    Tensors stored in pieces are refused: each tensor is converted (and LoRA-fused) as it is read."""
    out: StateDict = {}
    for path, ops in reads:
        with TensorReader(path) as reader:
            for key, value in iter_tensors(reader, ops, keep):
                if whole_key(key) != key:
                    raise CheckpointError(
                        f"{str(path)!r}: {whole_key(key)!r} is stored in pieces, which tensor-by-tensor loading "
                        "does not join; build this component without quantization or streaming"
                    )
                if key in out:
                    raise CheckpointError(f"{str(path)!r}: two tensors map to the module key {key!r} ({ops.name})")
                out[key] = conversion(key, value, device)
        logger.debug("read the tensors of %s tensor by tensor (%s)", Path(path).name, ops.name)
    return out
