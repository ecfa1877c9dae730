"""Host-side sources of packed block weights: all blocks in RAM, or a few slots filled from disk.

A source hands out a host uint8 buffer holding block `i` packed by the `BlockLayout`
(`acquire(i)`), and takes it back once the device copy made from it is complete (`release(i,
copied)`, where `copied` is an event to wait on before the buffer is overwritten, or None).
Both sources fuse LoRAs and apply the quantized storage dtypes through the same `WeightConversion`
as a full load, so a streamed model holds exactly the weights a fully loaded one would.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from tqdm import tqdm

from ltx_core.block_streaming.layout import BlockLayout
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.tensor_reader import (
    ShardedTensorReader,
    TensorReader,
    WeightFiles,
    open_tensor_reader,
    torch_dtype,
)
from ltx_core.loader.tensorwise import WeightConversion

logger = logging.getLogger(__name__)


class CopyDone(Protocol):
    def synchronize(self) -> None: ...


class BlockSource(Protocol):
    num_blocks: int

    def acquire(self, index: int) -> torch.Tensor: ...

    def release(self, index: int, copied: CopyDone | None) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class BlockKeys:
    """File keys of each block, found from the header only: block i -> [(file key, module key)]."""

    prefix: str
    per_block: tuple[tuple[tuple[str, str], ...], ...]

    @classmethod
    def scan(
        cls, reader: TensorReader | ShardedTensorReader, ops: SDOps, prefix: str, layout: BlockLayout
    ) -> BlockKeys:
        found: dict[int, list[tuple[str, str]]] = {}
        for file_key, info in reader.header.tensors.items():
            module_key = ops.rename(file_key)
            if module_key is None or not module_key.startswith(prefix):
                continue
            index_text, _, local = module_key[len(prefix) :].partition(".")
            if not index_text.isdigit():
                continue
            found.setdefault(int(index_text), []).append((file_key, module_key))
            if not ops.changes_values and local in layout.names:
                want = layout.place(local).shape
                if tuple(info.shape) != want:
                    raise CheckpointError(
                        f"{str(reader.path)!r}: {module_key!r} has shape {tuple(info.shape)}, the model expects {want}"
                    )
        if sorted(found) != list(range(len(found))):
            raise CheckpointError(
                f"{str(reader.path)!r}: block indices under {prefix!r} are not 0..n-1: {sorted(found)}"
            )
        if not ops.changes_values:
            for index, keys in found.items():
                local = {m[len(prefix) :].partition(".")[2] for _, m in keys}
                if local != layout.names:
                    missing, extra = sorted(layout.names - local), sorted(local - layout.names)
                    raise CheckpointError(
                        f"{str(reader.path)!r}: block {index} does not fit the model: missing {missing[:10]}, "
                        f"unexpected {extra[:10]}"
                    )
        return cls(prefix, tuple(tuple(found[i]) for i in range(len(found))))


def fill_block(
    reader: TensorReader | ShardedTensorReader,
    ops: SDOps,
    keys: BlockKeys,
    index: int,
    layout: BlockLayout,
    conversion: WeightConversion,
    buffer: torch.Tensor,
) -> None:
    """Read block `index` tensor by tensor, convert (LoRA, storage dtype), and pack it into `buffer`."""
    views = layout.views(buffer)
    block_prefix = f"{keys.prefix}{index}."
    filled = 0
    for file_key, module_key in keys.per_block[index]:
        local = module_key[len(block_prefix) :]
        qtype = layout.place(local).qtype if local in views else None
        if qtype is not None:
            # GGUF blocks are packed as stored (dequantized per call); LoRAs were refused at build.
            found = reader.info(file_key).dtype
            if found != qtype:
                raise CheckpointError(
                    f"{str(reader.path)!r}: {module_key!r} is stored as {found}, block 0's as {qtype}; "
                    "streaming needs every block stored in the same GGUF types"
                )
            place = layout.place(local)
            reader.read_raw_into(file_key, buffer[place.offset : place.offset + place.nbytes])
            filled += 1
            continue
        stored = torch_dtype(reader.info(file_key), path=reader.path, key=file_key)
        if (
            not ops.changes_values
            and local in views
            and conversion.is_identity(module_key, stored)
            and stored == views[local].dtype
        ):
            # Stored bytes are the packed bytes: read straight into the slot, no temporary tensor.
            place = layout.place(local)
            if reader.nbytes(file_key) == place.nbytes:
                reader.read_into(file_key, buffer[place.offset : place.offset + place.nbytes])
                filled += 1
                continue
        for key, value in ops.translate(file_key, reader.read(file_key)):
            local = key[len(block_prefix) :]
            if local not in views:
                raise CheckpointError(f"{str(reader.path)!r}: {key!r} is not a weight of the model's blocks")
            views[local].copy_(conversion(key, value))
            filled += 1
    if filled != len(views):
        raise CheckpointError(f"{str(reader.path)!r}: block {index} provided {filled} of {len(views)} tensors")


class RamBlockSource:
    """Every block packed in host memory (pinned when CUDA is present), LoRAs fused once at build."""

    def __init__(
        self, path: WeightFiles, ops: SDOps, keys: BlockKeys, layout: BlockLayout, conversion: WeightConversion,
        *, pin: bool = False,
    ) -> None:  # fmt: skip
        self.num_blocks = len(keys.per_block)
        self._buffers: list[torch.Tensor] = []
        with open_tensor_reader(path) as reader:
            for index in tqdm(range(self.num_blocks), desc="packing blocks in RAM", leave=False):
                buffer = layout.allocate(torch.device("cpu"), pin=pin)
                fill_block(reader, ops, keys, index, layout, conversion, buffer)
                self._buffers.append(buffer)

    @classmethod
    def from_modules(cls, blocks: Sequence[nn.Module], layout: BlockLayout, *, pin: bool = False) -> RamBlockSource:
        """Pack already-loaded blocks (any device) into host buffers; the blocks' tensors can then be freed."""
        source = cls.__new__(cls)
        source.num_blocks = len(blocks)
        source._buffers = []
        for block in tqdm(blocks, desc="packing blocks in RAM", leave=False):
            buffer = layout.allocate(torch.device("cpu"), pin=pin)
            views = layout.views(buffer)
            for name, tensor in (*block.named_parameters(), *block.named_buffers()):
                views[name].copy_(tensor.detach())
            source._buffers.append(buffer)
        return source

    def acquire(self, index: int) -> torch.Tensor:
        return self._buffers[index]

    def release(self, index: int, copied: CopyDone | None) -> None:
        pass  # the buffer is never overwritten

    def close(self) -> None:
        self._buffers.clear()


class DiskBlockSource:
    """`slots` host buffers filled from the safetensors file by a background thread.

    The thread reads ahead up to `prefetch` blocks past the one last asked for (cyclically: the
    next forward pass starts again at block 0), as far as free slots allow. A block is asked for
    with `acquire`; a slot is refilled only after its device copy has completed. Asking for a block
    that is not next in line evicts read-ahead blocks nobody holds, so any order works.
    """

    def __init__(
        self, path: WeightFiles, ops: SDOps, keys: BlockKeys, layout: BlockLayout, conversion: WeightConversion,
        *, slots: int = 2, prefetch: int = 1, pin: bool = False,
    ) -> None:  # fmt: skip
        if slots < 1:
            raise ValueError(f"a disk block source needs at least 1 host slot, got {slots}")
        self.num_blocks = len(keys.per_block)
        self._path, self._ops, self._keys, self._layout, self._conversion = path, ops, keys, layout, conversion
        self._prefetch = max(0, min(prefetch, slots - 1))
        # Free slots carry the event of the device copy that last read them (None: nothing pending).
        self._free: list[tuple[torch.Tensor, CopyDone | None]] = [
            (layout.allocate(torch.device("cpu"), pin=pin), None) for _ in range(slots)
        ]
        self._ready: dict[int, torch.Tensor] = {}
        self._in_use: set[int] = set()
        self._loading: int | None = None
        self._last: int | None = None  # the block last asked for (read-ahead direction)
        self._queue: deque[int] = deque()
        self._error: BaseException | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="ltx-block-fetcher", daemon=True)
        self._thread.start()

    # -- worker -----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            with open_tensor_reader(self._path) as reader:
                while True:
                    with self._cond:
                        while not self._closed and not (self._queue and self._free):
                            self._cond.wait()
                        if self._closed:
                            return
                        index = self._queue.popleft()
                        buffer, copied = self._free.pop()
                        self._loading = index
                    if copied is not None:
                        copied.synchronize()  # the device copy must have read the buffer before it is refilled
                    fill_block(reader, self._ops, self._keys, index, self._layout, self._conversion, buffer)
                    with self._cond:
                        self._ready[index] = buffer
                        self._loading = None
                        self._cond.notify_all()
        except BaseException as e:  # surfaced to the caller of acquire()
            with self._cond:
                self._error = e
                self._loading = None
                self._cond.notify_all()

    # -- caller side ------------------------------------------------------------------------------
    def _pending(self, index: int) -> bool:
        return index in self._ready or index == self._loading or index in self._queue

    def acquire(self, index: int) -> torch.Tensor:
        with self._cond:
            if index not in self._ready and index != self._loading:
                # Needed now: first in line, and read-ahead blocks nobody holds give their slots back
                # when none is free (so any access order makes progress).
                if index in self._queue:
                    self._queue.remove(index)
                self._queue.appendleft(index)
                self._evict_stale(index)
            self._schedule_after(index)
            self._cond.notify_all()
            while index not in self._ready:
                if self._error is not None:
                    raise RuntimeError(
                        f"reading block {index} from {self._path} failed: {self._error}"
                    ) from self._error
                if self._closed:
                    raise RuntimeError("the block source is closed")
                self._evict_stale(index)
                self._cond.wait()
            self._in_use.add(index)
            return self._ready[index]

    def _evict_stale(self, needed: int) -> None:
        if needed in self._ready or needed == self._loading or self._free:
            return
        for stale in [i for i in self._ready if i not in self._in_use]:
            self._free.append((self._ready.pop(stale), None))
        self._cond.notify_all()

    def _schedule_after(self, index: int) -> None:
        # A training step's backward pass asks for the blocks downwards: read ahead in that direction
        # once two requests in a row went down by one (inference only ever goes up, wrapping to 0).
        down = self._last is not None and index == self._last - 1
        self._last = index
        for step in range(1, self._prefetch + 1):
            if down and index - step < 0:
                break  # the next forward pass starts with blocks still resident on the device
            ahead = (index - step) % self.num_blocks if down else (index + step) % self.num_blocks
            if ahead != index and not self._pending(ahead):
                self._queue.append(ahead)

    def release(self, index: int, copied: CopyDone | None) -> None:
        """Never blocks the caller: the reader thread waits on `copied` before refilling the slot."""
        with self._cond:
            self._in_use.discard(index)
            buffer = self._ready.pop(index, None)
            if buffer is not None:
                self._free.append((buffer, copied))
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
