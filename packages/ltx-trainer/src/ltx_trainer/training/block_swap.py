"""The frozen base of a LoRA run with swapped blocks or float8 block weights (`acceleration.blocks_to_swap`,
`acceleration.quantization: fp8-cast`).

Both reuse the inference runtime (`ltx_core.runtime.build_transformer`): fp8-cast stores the blocks'
attention and feed-forward weights as float8 and upcasts them per call (`ltx_core.quantization.fp8_cast`);
block swap is the inference block streaming (`ltx_core.block_streaming`) with as many device slots as
resident blocks, serving the backward pass too (`BlockStreamer.for_training`). Swapping N of n blocks
gives n - N device slots: the forward pass ends with the top blocks resident, where the backward pass
starts, and the backward pass ends with the bottom ones, where the next forward starts, so each step
copies 2N blocks. The source is all blocks in host memory (pinned on CUDA) or the checkpoint file
read into two host buffers (`block_swap_source: disk`). The adapters and optimizer state stay on the
device.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ltx_core.loader import ComponentSpec
from ltx_core.runtime import RuntimeOptions, build_transformer

logger = logging.getLogger(__name__)

FLOAT8_DTYPES = frozenset({torch.float8_e4m3fn, torch.float8_e5m2})


def uses_runtime_base(blocks_to_swap: int, quantization: str | None) -> bool:
    """Whether the base is built by the inference runtime (swap or fp8-cast) rather than a plain load."""
    return blocks_to_swap > 0 or quantization == "fp8-cast"


def build_frozen_base(
    spec: ComponentSpec,
    model_path: object,
    *,
    device: torch.device,
    dtype: torch.dtype,
    blocks_to_swap: int,
    swap_source: str,
    quantization: str | None,
    checkpointing: bool,
) -> nn.Module:
    """The transformer with `blocks_to_swap` blocks streamed from `swap_source` and/or float8 block weights."""
    swap = blocks_to_swap > 0
    options = RuntimeOptions(
        quantization="fp8-cast" if quantization == "fp8-cast" else None,
        offload=("cpu" if swap_source == "ram" else "disk") if swap else "none",
        device_slots=1,  # resized below to the resident block count
    )
    model = build_transformer(spec, model_path, options, device=device, dtype=dtype)  # type: ignore[arg-type]
    if swap:
        blocks = model.num_blocks
        if blocks_to_swap >= blocks:
            model.block_streamer.close()
            raise ValueError(
                f"acceleration.blocks_to_swap: {blocks_to_swap} must be below the transformer's {blocks} blocks "
                f"(at most {blocks - 1}: one block stays on the device to run)"
            )
        model.block_streamer.set_device_slots(blocks - blocks_to_swap)
        model.block_streamer.for_training(checkpointing=checkpointing)
        logger.info(
            "block swap: %d of %d blocks swapped from %s, %d resident", blocks_to_swap, blocks, swap_source,
            blocks - blocks_to_swap,
        )  # fmt: skip
    return model


@contextmanager
def adapter_stand_ins(model: nn.Module, dtype: torch.dtype, device: torch.device) -> Iterator[None]:
    """While adapters are added, give the blocks' streamed (meta) and float8 weights a `dtype` stand-in.

    peft puts each adapter on its base layer's device and in its dtype: a meta weight would leave
    the adapter on the meta device and a float8 one would round its initial values to float8. The
    stand-in is one element expanded to the weight's shape (no memory), so the adapters start on
    `device` in `dtype` exactly as over a resident `dtype` base, from the same random draws.
    float8 weights come back afterwards; streamed ones keep the stand-in (a meta tensor would stop
    accelerate's `model.to(device)`) until the streamer points them at a device slot.
    """
    replaced: list[tuple[nn.Module, str, nn.Parameter]] = []
    blocks = getattr(model, "transformer_blocks", [])
    for block in blocks:
        for module in block.modules():
            for leaf, param in list(module._parameters.items()):
                if param is not None and (param.is_meta or param.dtype in FLOAT8_DTYPES):
                    replaced.append((module, leaf, param))
                    stand_in = torch.zeros((), dtype=dtype, device=device).expand(param.shape)
                    module._parameters[leaf] = nn.Parameter(stand_in, requires_grad=False)
    try:
        yield
    finally:
        for module, leaf, param in replaced:
            if not param.is_meta:
                module._parameters[leaf] = param
