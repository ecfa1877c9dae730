"""Run a model's block list with only a few blocks' weights on the device at a time.

`BlockStreamer.attach(model.transformer_blocks, source, slots)` installs a forward pre-hook on every
block that copies the block's weights into a device slot (and starts copying the next block), then
points the block's parameters at that slot; a post-hook marks the slot reusable once the compute
reading it is done. The blocks' own tensors stay on the meta device between calls, so the model
holds only the non-block weights plus `slots` blocks.

Training (autograd) reads a block's frozen weights twice: in the forward pass and again in the
backward pass, in reverse block order. Two cases:
- with gradient checkpointing the backward pass re-runs each block's forward (the pre-hook streams
  the block again); nothing the forward pass saved points into a slot;
- without it, autograd saves the weights each op needs for its gradient; those are views of a slot
  that a later block overwrites. `for_training(checkpointing=False)` packs such a saved view as
  (block, place in the slot) and fetches the block again when the backward pass unpacks it.
In the backward pass blocks are prefetched downwards (block i-1 while i runs) and a slot is refilled
only after the backward kernels that read it were issued. With `count` device slots the access
pattern forward 0..n-1, backward n-1..0 keeps the last blocks of one pass resident for the next:
each step copies `2 * (n - count)` blocks, as if `n - count` blocks were swapped and the rest resident.
Frozen tensors only: trainable parameters (LoRA adapters) are not part of the layout and stay where
they are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ltx_core.block_streaming.device_slots import DeviceBlockSlots
from ltx_core.block_streaming.sources import BlockSource

logger = logging.getLogger(__name__)


def _owner(block: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The module holding tensor `name` of a block, looking through adapter wrappers (peft's LoRA
    layers keep the wrapped Linear as `base_layer`, so a checkpoint name still finds its tensor)."""
    owner_name, _, leaf = name.rpartition(".")
    owner = block.get_submodule(owner_name) if owner_name else block
    while leaf not in owner._parameters and leaf not in owner._buffers and hasattr(owner, "base_layer"):
        owner = owner.base_layer
    return owner, leaf


def _assign(block: nn.Module, views: dict[str, torch.Tensor]) -> None:
    for name, view in views.items():
        owner, leaf = _owner(block, name)
        if leaf in owner._parameters:
            owner._parameters[leaf] = nn.Parameter(view, requires_grad=False)
        else:
            owner._buffers[leaf] = view


def _in_backward() -> bool:
    """True while the autograd engine runs (a checkpoint's recompute or a saved tensor's unpack)."""
    return torch._C._current_graph_task_id() != -1


@dataclass(frozen=True)
class _SlotRef:
    """A saved tensor that was a view of block `index`'s slot: where in the slot, and its geometry."""

    index: int
    dtype: torch.dtype
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


class BlockStreamer:
    """Owns the source and the device slots of one streamed block list."""

    def __init__(self, blocks: Sequence[nn.Module], source: BlockSource, slots: DeviceBlockSlots) -> None:
        if source.num_blocks != len(blocks):
            raise ValueError(f"the block source holds {source.num_blocks} blocks, the model has {len(blocks)}")
        self.blocks = list(blocks)
        self.source = source
        self.slots = slots
        self.training = False
        self.checkpointing = False
        self._saving: Any = None  # the saved-tensor hooks active around the current block's forward
        self._handles: list[Any] = []
        for index, block in enumerate(self.blocks):
            self._handles.append(block.register_forward_pre_hook(self._before(index)))
            self._handles.append(block.register_forward_hook(self._after(index)))

    def for_training(self, *, checkpointing: bool) -> None:
        """Serve a training run: prefetch towards the backward pass and keep its saved weights valid.

        `checkpointing` must say whether the model recomputes blocks in the backward pass (then the
        recompute streams them again); without it, weights saved for the backward pass are refetched."""
        self.training = True
        self.checkpointing = checkpointing

    def set_device_slots(self, count: int) -> None:
        """Reallocate the device slots: `count` blocks resident at a time (1..number of blocks)."""
        if not 1 <= count <= len(self.blocks):
            raise ValueError(f"device slots must be 1..{len(self.blocks)} (the number of blocks), got {count}")
        layout, device = self.slots.layout, self.slots.device
        self.slots = None  # type: ignore[assignment]  # free the old slots before allocating the new ones
        self.slots = DeviceBlockSlots(layout, device, count)

    def _next(self, index: int, backward: bool) -> int | None:
        """The block to prefetch while `index` runs, None for none."""
        if self.slots.count < 2 or len(self.blocks) < 2:
            return None
        if not self.training:
            return (index + 1) % len(self.blocks)  # inference: the next denoising step starts at block 0
        if backward:
            return index - 1 if index > 0 else None
        # The last block's forward is followed by the backward pass, which starts from the top.
        return index + 1 if index + 1 < len(self.blocks) else None

    def _fetch(self, index: int, backward: bool) -> dict[str, torch.Tensor]:
        if backward:
            self.slots.finished_all_but(index)
        views = self.slots.get(index, self.source)
        ahead = self._next(index, backward)
        if ahead is not None:
            # Start the next block's copy now so it overlaps this block's compute.
            self.slots.issue(ahead, self.source, protect=index)
        return views

    def _before(self, index: int):
        def hook(block: nn.Module, _args: Any) -> None:
            backward = self.training and _in_backward()
            _assign(block, self._fetch(index, backward))
            if self.training and not self.checkpointing and not backward and torch.is_grad_enabled():
                self._saving = torch.autograd.graph.saved_tensors_hooks(self._pack(index), self._unpack)
                self._saving.__enter__()

        return hook

    def _after(self, index: int):
        def hook(_block: nn.Module, _args: Any, _out: Any) -> None:
            if self._saving is not None:
                saving, self._saving = self._saving, None
                saving.__exit__(None, None, None)
            self.slots.finished(index)

        return hook

    def _pack(self, index: int):
        def pack(tensor: torch.Tensor) -> torch.Tensor | _SlotRef:
            if tensor.device.type != self.slots.device.type or not self.slots.holds(tensor):
                return tensor
            return _SlotRef(index, tensor.dtype, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()))

        return pack

    def _unpack(self, saved: torch.Tensor | _SlotRef) -> torch.Tensor:
        if isinstance(saved, torch.Tensor):
            return saved
        self._fetch(saved.index, backward=True)
        storage = self.slots.storage_of(saved.index).untyped_storage()
        out = torch.empty(0, dtype=saved.dtype, device=self.slots.device)
        return out.set_(storage, saved.offset, saved.size, saved.stride)

    def close(self) -> None:
        """Remove the hooks, stop the source's reader and free the slots."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.source.close()
        for block in self.blocks:
            block.to(torch.device("meta"))
