"""One-stage text/image-to-video+audio with a full checkpoint: `python -m ltx_pipelines.ti2vid_one_stage`.

One guided stage at the output resolution: the LTX-2 scheduler's sigmas for the default token
count (30 steps for LTX-2.3 checkpoints, 40 for LTX-2), multi-modal guidance (CFG against the
negative prompt, STG, modality isolation, rescaling) and Euler steps, then decoding.

From Python the stage also takes caller-encoded `StageConditions` (`conditions=`): conditioning items
for either modality, initial latents, a frozen modality, or one modality left out (then the result
is an `AudioGeneration` when the video is left out).
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.command import forward_to
from ltx_pipelines.cli.guided_command import build_guided, guided_command
from ltx_pipelines.cli.request_flags import GeneratedKeyframeFlags

COMMAND = guided_command(
    __name__,
    __doc__,
    lambda run: build_guided("ltx_pipelines.pipelines.ti2vid_one_stage:TI2VidOneStagePipeline", run),
    two_stage=False,
    groups=(GeneratedKeyframeFlags(),),
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.ti2vid_one_stage")


if __name__ == "__main__":
    sys.exit(main())
