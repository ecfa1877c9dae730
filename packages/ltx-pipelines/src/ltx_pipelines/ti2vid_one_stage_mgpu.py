"""One-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.ti2vid_one_stage_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.ti2vid_one_stage`. The guided stage runs the
transformer sequence parallel (Ulysses attention over the ranks), or with `--guidance-parallel` each step's
guidance passes (conditional, negative prompt, STG, modality isolation) on different ranks, sequence parallel
inside a pass group when there are more ranks than passes; either way the single-device result. Each prompt
is encoded on its own rank, the video is decoded tile-parallel, rank 0 writes. `--device cpu` runs N gloo
processes."""

from __future__ import annotations

import sys

from ltx_pipelines import ti2vid_one_stage
from ltx_pipelines.cli.multigpu import MultiDeviceCommand

COMMAND = MultiDeviceCommand.of(ti2vid_one_stage.COMMAND, __name__, __doc__)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
