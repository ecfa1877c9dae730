"""Run a model's block list with only a few blocks' weights on the device at a time.

`BlockStreamer.attach(model.transformer_blocks, source, slots)` installs a forward pre-hook on every
block that copies the block's weights into a device slot (and starts copying the next block), then
points the block's parameters at that slot; a post-hook marks the slot reusable once the compute
reading it is done. The blocks' own tensors stay on the meta device between calls, so the model
holds only the non-block weights plus `slots` blocks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ltx_core.block_streaming.device_slots import DeviceBlockSlots
from ltx_core.block_streaming.sources import BlockSource

logger = logging.getLogger(__name__)


def _assign(block: nn.Module, views: dict[str, torch.Tensor]) -> None:
    for name, view in views.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = block.get_submodule(owner_name) if owner_name else block
        if leaf in owner._parameters:
            owner._parameters[leaf] = nn.Parameter(view, requires_grad=False)
        else:
            owner._buffers[leaf] = view


class BlockStreamer:
    """Owns the source and the device slots of one streamed block list."""

    def __init__(self, blocks: Sequence[nn.Module], source: BlockSource, slots: DeviceBlockSlots) -> None:
        if source.num_blocks != len(blocks):
            raise ValueError(f"the block source holds {source.num_blocks} blocks, the model has {len(blocks)}")
        self.blocks = list(blocks)
        self.source = source
        self.slots = slots
        self._handles: list[Any] = []
        for index, block in enumerate(self.blocks):
            self._handles.append(block.register_forward_pre_hook(self._before(index)))
            self._handles.append(block.register_forward_hook(self._after(index)))

    def _before(self, index: int):
        def hook(block: nn.Module, _args: Any) -> None:
            _assign(block, self.slots.get(index, self.source))
            if self.slots.count > 1 and len(self.blocks) > 1:
                # Start the next block's copy now so it overlaps this block's compute.
                self.slots.issue((index + 1) % len(self.blocks), self.source, protect=index)

        return hook

    def _after(self, index: int):
        def hook(_block: nn.Module, _args: Any, _out: Any) -> None:
            self.slots.finished(index)

        return hook

    def close(self) -> None:
        """Remove the hooks, stop the source's reader and free the slots."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.source.close()
        for block in self.blocks:
            block.to(torch.device("meta"))
