"""Distilled two-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.distilled_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.distilled`. Both stages run the transformer
sequence parallel by default (video and audio tokens sharded over the ranks, Ulysses attention: the
single-device result, as the reference's runner); `--stage-2-parallel tiled` runs stage 2 tiled data
parallel instead (one overlapping spatial tile per rank, blended; the stage-1 audio is shipped). Gemma
runs on rank 0 and its contexts are shared, the video is decoded tile-parallel, rank 0 writes.
`--device cpu` runs N gloo processes."""

from __future__ import annotations

import sys

from ltx_pipelines import distilled
from ltx_pipelines.cli.multigpu import MultiDeviceCommand

COMMAND = MultiDeviceCommand.of(distilled.COMMAND, __name__, __doc__)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
