"""Distilled two-stage text/image-to-video+audio: `python -m ltx_pipelines.distilled`.

Stage 1 denoises at half resolution with the 8 distilled sigmas; the video latent is upsampled x2
(through the VAE latent statistics); stage 2 re-noises it (and the stage-1 audio) to the first
stage-2 sigma and refines at full resolution with the 3 stage-2 sigmas. No guidance: one
transformer call per step. The transformer is loaded once for both stages.
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.command import PipelineCommand, build_distilled, forward_to
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.request_flags import GeneratedKeyframeFlags, VideoFlags
from ltx_pipelines.cli.runtime_flags import TilingFlags
from ltx_pipelines.engine.model_versions import DEMO_FAMILIES

COMMAND = PipelineCommand.for_module(
    __name__,
    __doc__,
    models=ModelFlags.distilled_two_stage(demo_families=DEMO_FAMILIES),
    groups=(VideoFlags(two_stage=True, auto_duration=True), TilingFlags(), GeneratedKeyframeFlags()),
    build=lambda run: build_distilled("ltx_pipelines.pipelines.distilled:DistilledPipeline", run),
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.distilled")


if __name__ == "__main__":
    sys.exit(main())
