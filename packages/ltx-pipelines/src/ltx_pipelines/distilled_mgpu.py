"""Distilled two-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.distilled_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.distilled`. Both stages run the transformer
sequence parallel by default (video and audio tokens sharded over the ranks, Ulysses attention: the
single-device result, as the reference's runner); `--stage-2-parallel tiled` runs stage 2 tiled data
parallel instead (one overlapping spatial tile per rank, blended; the stage-1 audio is shipped). Gemma
runs on rank 0 and its contexts are shared, the video is decoded tile-parallel, rank 0 writes.
`--device cpu` runs N gloo processes.
"""

from __future__ import annotations

import sys

from ltx_pipelines import distilled
from ltx_pipelines.cli.multigpu import MultiDeviceCommand, MultiGpuFlags
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.multigpu import MultiDeviceMixin


class DistilledMgpuPipeline(MultiDeviceMixin, DistilledPipeline):
    """`DistilledPipeline` over the ranks of the default process group: sequence parallel, stage 2 tiled data
    parallel with `stage_2_parallel="tiled"`."""


COMMAND = MultiDeviceCommand.of(
    distilled.COMMAND,
    __name__,
    __doc__,
    lambda run: DistilledMgpuPipeline(
        run.models.checkpoint,
        run.models.spatial_upsampler,
        run.models.gemma_root,
        **run.pipeline_options(),
        **run[MultiGpuFlags].pipeline_options(),
    ),
)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
