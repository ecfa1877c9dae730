"""HQ two-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.ti2vid_two_stages_hq_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.ti2vid_two_stages_hq`; both stages run the
transformer sequence parallel (Ulysses attention over the ranks), Gemma runs on rank 0 and its
contexts are broadcast, rank 0 decodes and writes. `--device cpu` runs N gloo processes.
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.multigpu import guided_mgpu_main
from ltx_pipelines.engine.multigpu import SequenceParallelMixin
from ltx_pipelines.ti2vid_two_stages_hq import TI2VidTwoStagesHQPipeline
from ltx_pipelines.ti2vid_two_stages_hq import main as single_device_main


class TI2VidTwoStagesHQMgpuPipeline(SequenceParallelMixin, TI2VidTwoStagesHQPipeline):
    """`TI2VidTwoStagesHQPipeline` with its transformers sequence parallel over the default process group."""


main = guided_mgpu_main(
    single_device_main,
    TI2VidTwoStagesHQMgpuPipeline,
    prog="python -m ltx_pipelines.ti2vid_two_stages_hq_mgpu",
    description=__doc__.splitlines()[0] if __doc__ else None,
)


if __name__ == "__main__":
    sys.exit(main())
