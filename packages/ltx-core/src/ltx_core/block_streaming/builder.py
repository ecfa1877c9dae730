"""Attaching block streaming to a model built on the meta device."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

import torch
from torch import nn

from ltx_core.block_streaming.device_slots import DeviceBlockSlots
from ltx_core.block_streaming.layout import BlockLayout
from ltx_core.block_streaming.sources import BlockKeys, BlockSource, DiskBlockSource, RamBlockSource
from ltx_core.block_streaming.streamer import BlockStreamer
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.tensor_reader import TensorReader, WeightFiles, open_tensor_reader
from ltx_core.loader.tensorwise import WeightConversion
from ltx_core.quantization.gguf import is_block_qtype, use_gguf_linears

logger = logging.getLogger(__name__)

BlockSourceKind = Literal["ram", "disk"]
MAX_DEVICE_SLOTS = 3


def block_layout(
    blocks: nn.ModuleList, blocks_prefix: str, conversion: WeightConversion, qtypes: Mapping[str, str] | None = None
) -> BlockLayout:
    """The packed layout of block 0 under `conversion`'s dtypes (and, for a GGUF file, the ggml block
    types `qtypes` of block 0's quantized tensors, by name in the block); every block must share it."""

    def dtype_of(name: str, tensor: torch.Tensor) -> torch.dtype:
        storage = conversion.storage_dtypes.get(f"{blocks_prefix}0.{name}")
        if storage is not None:
            return storage
        return conversion.dtype if tensor.is_floating_point() else tensor.dtype

    layout = BlockLayout.of(blocks[0], dtype_of, qtypes)
    for index, block in enumerate(blocks):
        names = {n for n, _ in (*block.named_parameters(), *block.named_buffers())}
        if names != layout.names:
            raise ValueError(f"block {index} has other tensors than block 0; blocks must share one layout to stream")
    return layout


def _block_qtypes(reader: TensorReader, ops: SDOps, block_prefix: str) -> dict[str, str]:
    """Name in the block -> ggml block type, for block 0's tensors a GGUF file stores quantized."""
    out: dict[str, str] = {}
    for file_key, info in reader.header.tensors.items():
        module_key = ops.rename(file_key)
        if module_key is not None and module_key.startswith(block_prefix) and is_block_qtype(info.dtype):
            out[module_key[len(block_prefix) :]] = info.dtype
    return out


def attach_block_streaming(
    model: nn.Module,
    path: WeightFiles,
    ops: SDOps,
    conversion: WeightConversion,
    *,
    device: torch.device,
    source: BlockSourceKind,
    device_slots: int = 2,
    host_slots: int = 2,
    prefetch: int = 1,
    blocks_attr: str = "transformer_blocks",
) -> BlockStreamer:
    """Serve `model.<blocks_attr>` from a RAM or disk source through `device_slots` device buffers.

    `path`: one file, or the shards of one model. The non-block weights must be loaded separately; the
    blocks' own parameters stay on the meta device and are pointed at a device slot by the streamer's
    hooks before each block runs.
    """
    if not 1 <= device_slots <= MAX_DEVICE_SLOTS:
        raise ValueError(f"device_slots must be 1..{MAX_DEVICE_SLOTS}, got {device_slots}")
    blocks = getattr(model, blocks_attr)
    prefix = f"{blocks_attr}."
    with open_tensor_reader(path) as reader:
        qtypes = _block_qtypes(reader, ops, f"{prefix}0.")
        layout = block_layout(blocks, prefix, conversion, qtypes)
        keys = BlockKeys.scan(reader, ops, prefix, layout)
    if qtypes:
        for block in blocks:
            use_gguf_linears(block, qtypes)
    if len(keys.per_block) != len(blocks):
        raise ValueError(f"{str(path)!r} holds {len(keys.per_block)} blocks, the model has {len(blocks)}")
    pin = device.type == "cuda"
    block_source: BlockSource
    if source == "ram":
        block_source = RamBlockSource(path, ops, keys, layout, conversion, pin=pin)
    elif source == "disk":
        block_source = DiskBlockSource(
            path, ops, keys, layout, conversion, slots=host_slots, prefetch=prefetch, pin=pin
        )
    else:
        raise ValueError(f"unknown block source {source!r}; accepted: 'ram', 'disk'")
    slots = DeviceBlockSlots(layout, device, device_slots)
    logger.info(
        "streaming %d blocks of %.1f MB from %s through %d device slots", len(blocks), layout.nbytes / 2**20, source,
        device_slots,
    )  # fmt: skip
    return BlockStreamer(blocks, block_source, slots)


def stream_loaded_blocks(
    model: nn.Module, device: torch.device, *, device_slots: int = 2, blocks_attr: str = "transformer_blocks"
) -> BlockStreamer:
    """Stream the blocks of an already-built model from (pinned) host memory; its block tensors are freed.

    For models built in memory (random weights in benchmarks, weights edited after loading); the
    non-block weights should already be on `device`.
    """
    blocks = getattr(model, blocks_attr)
    layout = BlockLayout.of(blocks[0], lambda _name, tensor: tensor.dtype)
    source = RamBlockSource.from_modules(blocks, layout, pin=device.type == "cuda")
    for block in blocks:
        block.to(torch.device("meta"))
    return BlockStreamer(blocks, source, DeviceBlockSlots(layout, device, device_slots))
