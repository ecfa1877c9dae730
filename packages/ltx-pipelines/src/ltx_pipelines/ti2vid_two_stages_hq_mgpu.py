"""HQ two-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.ti2vid_two_stages_hq_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.ti2vid_two_stages_hq`. Stage 1 runs the
transformer sequence parallel (the single-device result); stage 2 runs tiled data parallel by default (one
overlapping spatial tile per rank, blended; the reference's tiled schedule 0.625, 0.4, 0), or sequence
parallel with `--stage-2-parallel sequence`. Each prompt is encoded on its own rank, the video is decoded
tile-parallel, rank 0 writes. `--device cpu` runs N gloo processes.
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.multigpu import guided_mgpu_main
from ltx_pipelines.ti2vid_two_stages_hq import main as single_device_main

main = guided_mgpu_main(
    single_device_main,
    default_stage_2="tiled",
    prog="python -m ltx_pipelines.ti2vid_two_stages_hq_mgpu",
    description=__doc__.splitlines()[0] if __doc__ else None,
)


if __name__ == "__main__":
    sys.exit(main())
