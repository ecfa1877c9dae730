"""A few device buffers that blocks are copied into, with the copy overlapping compute on CUDA.

On CUDA, copies run on a dedicated stream: copying block i+1 into a free slot proceeds while block i
computes; the compute stream waits on the copy's event before using a slot, and a slot is only
overwritten after the compute that read it has finished (its `compute_done` event). Everywhere else
the same calls run synchronously (a plain memcpy), which is how the streaming logic is tested on
the CPU.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from ltx_core.block_streaming.layout import BlockLayout
from ltx_core.block_streaming.sources import BlockSource


class _SyncBackend:
    """Synchronous: copies complete when issued; events are unnecessary."""

    def copy(self, dst: torch.Tensor, src: torch.Tensor, after: object | None) -> object | None:
        dst.copy_(src)
        return None

    def wait(self, event: object | None) -> None:
        pass

    def compute_done(self) -> object | None:
        return None


class _CudaBackend:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device=device)

    def copy(self, dst: torch.Tensor, src: torch.Tensor, after: object | None) -> torch.cuda.Event:
        if after is not None:
            self.stream.wait_event(after)  # the slot's last reader has finished
        with torch.cuda.stream(self.stream):
            dst.copy_(src, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.stream)
        return done

    def wait(self, event: object | None) -> None:
        if event is not None:
            torch.cuda.current_stream(self.device).wait_event(event)

    def compute_done(self) -> torch.cuda.Event:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event


@dataclass
class _Slot:
    buffer: torch.Tensor
    views: dict[str, torch.Tensor]
    copied: object | None = None
    compute_done: object | None = None
    index: int | None = None


@dataclass
class DeviceBlockSlots:
    """`count` device buffers of one block each, least-recently-used first to be refilled."""

    layout: BlockLayout
    device: torch.device
    count: int
    _slots: list[_Slot] = field(init=False)
    _resident: OrderedDict[int, _Slot] = field(init=False)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"block streaming needs at least 1 device slot, got {self.count}")
        self._backend = _CudaBackend(self.device) if self.device.type == "cuda" else _SyncBackend()
        self._slots = []
        for _ in range(self.count):
            buffer = self.layout.allocate(self.device)
            self._slots.append(_Slot(buffer, self.layout.views(buffer)))
        self._resident = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(s.buffer.numel() for s in self._slots)

    def _victim(self, protect: int | None) -> _Slot:
        for slot in self._slots:
            if slot.index is None:
                return slot
        for index, slot in self._resident.items():  # oldest first
            if index != protect:
                return slot
        raise RuntimeError("no device slot can be refilled")

    def issue(self, index: int, source: BlockSource, protect: int | None = None) -> None:
        """Start copying block `index` into a slot (no-op when it is resident)."""
        if index in self._resident:
            return
        slot = self._victim(protect)
        if slot.index is not None:
            del self._resident[slot.index]
        host = source.acquire(index)
        slot.copied = self._backend.copy(slot.buffer, host, slot.compute_done)
        source.release(index, slot.copied)
        slot.index, slot.compute_done = index, None
        self._resident[index] = slot

    def get(self, index: int, source: BlockSource) -> dict[str, torch.Tensor]:
        """Views of block `index` on the device, usable by the compute stream once this returns."""
        self.issue(index, source)
        slot = self._resident[index]
        self._resident.move_to_end(index)
        self._backend.wait(slot.copied)
        return slot.views

    def finished(self, index: int) -> None:
        """The compute that reads block `index` has been issued: its slot may be refilled after it."""
        slot = self._resident.get(index)
        if slot is not None:
            slot.compute_done = self._backend.compute_done()

    def finished_all_but(self, index: int) -> None:
        """Every resident block other than `index` is done with, as of the compute issued so far.

        The backward pass reads a block's weights after its forward post-hook has run, so the
        event that post-hook recorded is too early; before the backward pass moves on to block
        `index`, the blocks it has left get an event that covers their backward kernels."""
        event = None
        for resident, slot in self._resident.items():
            if resident != index:
                event = event if event is not None else self._backend.compute_done()
                slot.compute_done = event

    def storage_of(self, index: int) -> torch.Tensor:
        """The device buffer block `index` occupies (it must be resident)."""
        return self._resident[index].buffer

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor` lives in one of the slots (a view of a block's streamed weights)."""
        ptr = tensor.untyped_storage().data_ptr()
        return any(slot.buffer.untyped_storage().data_ptr() == ptr for slot in self._slots)
