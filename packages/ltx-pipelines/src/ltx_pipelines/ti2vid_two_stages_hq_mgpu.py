"""HQ two-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.ti2vid_two_stages_hq_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.ti2vid_two_stages_hq`. Stage 1 runs the
transformer sequence parallel (the single-device result); stage 2 runs tiled data parallel by default (one
overlapping spatial tile per rank, blended; the reference's tiled schedule 0.625, 0.4, 0), or sequence
parallel with `--stage-2-parallel sequence`. Each prompt is encoded on its own rank, the video is decoded
tile-parallel, rank 0 writes. `--device cpu` runs N gloo processes."""

from __future__ import annotations

import sys

from ltx_pipelines import ti2vid_two_stages_hq
from ltx_pipelines.cli.multigpu import MultiDeviceCommand

COMMAND = MultiDeviceCommand.of(ti2vid_two_stages_hq.COMMAND, __name__, __doc__, default_stage_2="tiled")
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
