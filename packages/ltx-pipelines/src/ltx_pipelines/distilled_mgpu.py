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
from collections.abc import Sequence

import torch

from ltx_pipelines.cli.multigpu import MgpuCli, main_mgpu, mgpu_options
from ltx_pipelines.cli.runner import DISTILLED_LAYOUT, ParsedRun
from ltx_pipelines.distilled import DistilledPipeline


def build(run: ParsedRun, device: torch.device) -> DistilledPipeline:
    """This rank's `DistilledPipeline`, run over the ranks (`parallel`)."""
    options = {**run.pipeline_options(), "device": device, **mgpu_options(run)}
    return DistilledPipeline(run.checkpoint_path, run.spatial_upsampler_path, run.gemma_root, **options)


def main(argv: Sequence[str] | None = None) -> int:
    cli = MgpuCli(
        prog="python -m ltx_pipelines.distilled_mgpu",
        description=__doc__.splitlines()[0] if __doc__ else None,
        layout=DISTILLED_LAYOUT,
    )
    return main_mgpu(cli, argv, build=build)


if __name__ == "__main__":
    sys.exit(main())
