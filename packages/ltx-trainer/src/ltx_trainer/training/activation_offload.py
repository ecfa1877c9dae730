"""Activation offload for gradient checkpointing (`acceleration.offload_activations`).

With gradient checkpointing each block keeps only its input streams for the backward pass (the
float32 token states, `tokens x width x 4` bytes per block and stream), and those add up over the
blocks: 48 blocks of the 22B at 768x512x121 keep ~5 GiB. Here each block's input token state goes
to host memory right after it is produced and the device copy is dropped; the recompute in the
backward pass copies it back. Copies are exact, so the gradients equal those without offload (the
gradient of the token state takes the same route back: host, then device).

Everything else a block reads (text context, RoPE, AdaLN modulations) is shared by all blocks and
stays where it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from torch.utils.checkpoint import checkpoint

from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.model.transformer.block import StreamState


@dataclass(frozen=True)
class HostOffloadedCheckpoint:
    """A `LTXModel.block_checkpoint`: non-reentrant checkpoint whose kept inputs live in `host` memory."""

    host: str = "cpu"

    def __call__(
        self,
        block: nn.Module,
        video: StreamState | None,
        audio: StreamState | None,
        perturbations: BatchedPerturbationConfig | None,
        index: int,
    ) -> tuple[StreamState | None, StreamState | None]:
        device = (video or audio).x.device  # type: ignore[union-attr]

        def park(state: StreamState | None) -> StreamState | None:
            # copy=True: on the CPU too the kept input is a copy and the block's own output is dropped,
            # so the same code runs (and is tested) where host and device are one memory.
            # non_blocking: a CUDA copy to host lands in pinned memory and overlaps the next block.
            return None if state is None else state.with_x(state.x.to(self.host, copy=True, non_blocking=True))

        def back(state: StreamState | None) -> StreamState | None:
            return None if state is None else state.with_x(state.x.to(device, copy=True, non_blocking=True))

        def run(parked_video: StreamState | None, parked_audio: StreamState | None):
            return block(back(parked_video), back(parked_audio), perturbations, index)

        return checkpoint(run, park(video), park(audio), use_reentrant=False)


def enable_activation_offload(model: nn.Module, enabled: bool) -> None:
    """Install (or remove) the offloading checkpoint on an `LTXModel` (before peft wraps it)."""
    model.block_checkpoint = HostOffloadedCheckpoint() if enabled else None
