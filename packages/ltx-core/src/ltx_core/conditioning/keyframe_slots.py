"""Generated keyframe slots: extra one-pixel-frame tokens that the sampler generates (LTX-2.5 DFR).

A slot is a latent frame's worth of tokens timed at a single pixel frame [t, t + 1), marked for the
model's keyframe embedding and fully denoised (mask 1). It carries no conditioning content: its latent
starts as zeros, or as `initial` content that the noiser blends toward noise like any generated token.
After sampling, `read_generated_keyframes` takes the slots' content back out of the final state,
before `clear_conditioning` drops the appended tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

import torch

from ltx_core.conditioning.item import ConditioningError
from ltx_core.conditioning.keyframe import VideoConditionByKeyframeIndex, extend_keyframes_mask
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.types import LatentState


@dataclass(frozen=True, eq=False)
class VideoGeneratedKeyframeSlots:
    """Append one slot per pixel frame in `positions` (strictly increasing, inside the target).

    `initial`: optional (B, C, K, h, w) latent the slots start from (K = len(positions), the target's
    latent h, w); None starts them at zeros. Must be the last item that appends video tokens, so the
    slots are the state's final `len(positions) * tokens_per_latent_frame` tokens.
    """

    positions: tuple[int, ...]
    initial: torch.Tensor | None = None

    def apply_to(self, state: LatentState, tools: VideoLatentTools) -> LatentState:
        positions = tuple(int(p) for p in self.positions)
        pixel_frames = tools.target_shape.to_pixel_shape(tools.fps, tools.scale).frames
        if not positions or any(b <= a for a, b in pairwise(positions)):
            raise ConditioningError(f"keyframe slot positions must be non-empty and increasing, got {positions}")
        if positions[0] < 1 or positions[-1] >= pixel_frames:
            raise ConditioningError(
                f"keyframe slot positions must lie in [1, {pixel_frames}) (frame 0 is the image latent), "
                f"got {positions}"
            )
        grid = tools.target_shape
        one_frame = (state.batch_size, grid.channels, 1, grid.height, grid.width)
        if self.initial is not None and tuple(self.initial.shape) != (*one_frame[:2], len(positions), *one_frame[3:]):
            raise ConditioningError(
                f"keyframe slot initial latent must be {(*one_frame[:2], len(positions), *one_frame[3:])}, "
                f"got {tuple(self.initial.shape)}"
            )
        start = state.latent.shape[1]
        slots = state
        for index, frame in enumerate(positions):
            latent = torch.zeros(one_frame) if self.initial is None else self.initial[:, :, index : index + 1]
            # The keyframe item gives a single-pixel-frame token block its timing; strength 0 makes it
            # a generated (mask 1) block. Its content moves from the clean side to the noisy side below.
            slots = VideoConditionByKeyframeIndex(latent, frame, strength=0.0).apply_to(slots, tools)
        count = slots.latent.shape[1] - start
        generated = slots.clean_latent[:, start:]
        return replace(
            slots,
            latent=torch.cat([slots.latent[:, :start], generated.to(slots.latent.dtype)], dim=1),
            clean_latent=torch.cat([slots.clean_latent[:, :start], torch.zeros_like(generated)], dim=1),
            keyframes_mask=extend_keyframes_mask(state, count, marked=True),
        )


def read_generated_keyframes(
    state: LatentState, tools: VideoLatentTools, num_slots: int, *, first_token: int | None = None
) -> torch.Tensor:
    """`num_slots` slots of a sampled state as a (B, C, K, h, w) latent, one frame per slot. `first_token`:
    where the slots start (None: right after the target grid, where they are when applied first)."""
    start = tools.token_count if first_token is None else first_token
    stop = start + num_slots * tools.tokens_per_latent_frame
    if num_slots < 1 or start < tools.token_count or stop > state.latent.shape[1]:
        raise ValueError(
            f"the state has {state.latent.shape[1]} tokens ({tools.token_count} target): no {num_slots} keyframe "
            f"slots at token {start}"
        )
    # Tokens are frame-major, so K one-frame slots unpatchify as one K-frame grid.
    shape = replace(tools.target_shape, batch=state.batch_size, frames=num_slots)
    return tools.patchifier.unpatchify(state.latent[:, start:stop], shape)
