"""Block streaming: run the transformer with only a few blocks' weights on the device.

Non-block weights stay resident; each block's weights come from a RAM source (all blocks packed in
pinned host memory, LoRAs fused once) or a disk source (a few host slots refilled from the
safetensors file by a background read-ahead thread, LoRAs fused as each block arrives), and are
copied into 1-3 device slots -- on CUDA on a dedicated stream with events, so copy overlaps
compute; elsewhere synchronously. The output equals the non-streamed model's exactly.

Reach it through `ltx_core.runtime.build_transformer(..., RuntimeOptions(offload="cpu"|"disk"))`.
"""

from ltx_core.block_streaming.builder import (
    MAX_DEVICE_SLOTS,
    attach_block_streaming,
    block_layout,
    stream_loaded_blocks,
)
from ltx_core.block_streaming.device_slots import DeviceBlockSlots
from ltx_core.block_streaming.layout import BlockLayout, TensorPlace
from ltx_core.block_streaming.sources import BlockKeys, BlockSource, DiskBlockSource, RamBlockSource
from ltx_core.block_streaming.streamer import BlockStreamer

__all__ = [
    "MAX_DEVICE_SLOTS",
    "BlockKeys",
    "BlockLayout",
    "BlockSource",
    "BlockStreamer",
    "DeviceBlockSlots",
    "DiskBlockSource",
    "RamBlockSource",
    "TensorPlace",
    "attach_block_streaming",
    "block_layout",
    "stream_loaded_blocks",
]
