"""Keyframe interpolation, two stages with a full checkpoint: `python -m ltx_pipelines.keyframe_interpolation`.

Each `--image PATH FRAME_IDX STRENGTH [CRF]` is a keyframe at any pixel frame: its VAE latent is
appended to the video tokens as guiding tokens (positioned at that frame, denoise mask 1 - strength)
in both stages - frame 0 included, which is never substituted into the generated grid - and the
appended tokens are dropped after each stage. Stage 1 runs guided at half resolution, stage 2
refines at full resolution with the distilled LoRA fused in; unlike the text/image-to-video two-stage
pipeline, the audio that stage 2 refines is the one decoded.
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.command import forward_to
from ltx_pipelines.cli.guided_command import build_guided, guided_command

COMMAND = guided_command(
    __name__,
    __doc__,
    lambda run: build_guided("ltx_pipelines.pipelines.keyframe_interpolation:KeyframeInterpolationPipeline", run),
    two_stage=True,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.keyframe_interpolation")


if __name__ == "__main__":
    sys.exit(main())
