"""Two-stage text/image-to-video+audio with a full checkpoint: `python -m ltx_pipelines.ti2vid_two_stages`.

Stage 1 runs guided at half resolution (LTX-2 scheduler sigmas, Euler); the video latent is
upsampled x2; stage 2 rebuilds the transformer with the distilled LoRA fused in and refines at full
resolution with the 3 stage-2 distilled sigmas and no guidance. Stage 2 also denoises the
re-noised stage-1 audio alongside the video (the video attends to it) but the stage-1 audio is the
one decoded, as in the reference.

Over several devices (`parallel=MultiDevice(...)`) a tiled stage 2 uses the reference's tiled schedule
and ships the stage-1 audio as well.
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.command import forward_to
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.cli.request_flags import GeneratedKeyframeFlags

COMMAND = guided_command(
    __name__,
    __doc__,
    lambda run: build_guided("ltx_pipelines.pipelines.ti2vid_two_stages:TI2VidTwoStagesPipeline", run),
    two_stage=True,
    groups=(GeneratedKeyframeFlags(),),
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.ti2vid_two_stages")


if __name__ == "__main__":
    sys.exit(main())
