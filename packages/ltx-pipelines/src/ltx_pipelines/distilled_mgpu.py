"""Distilled two-stage text/image-to-video+audio on several devices: `python -m ltx_pipelines.distilled_mgpu`.

`--num-gpus N` and the same flags and outputs as `ltx_pipelines.distilled`; both stages run the transformer sequence
parallel (video and audio tokens sharded over the ranks, Ulysses attention), Gemma runs on rank 0
and its contexts are broadcast, rank 0 decodes and writes. `--device cpu` runs N gloo processes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

from ltx_pipelines.cli.multigpu import main_mgpu
from ltx_pipelines.cli.runner import DISTILLED_LAYOUT, ParsedRun, PipelineCli
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.multigpu import SequenceParallelMixin


class DistilledMgpuPipeline(SequenceParallelMixin, DistilledPipeline):
    """`DistilledPipeline` with its transformer sequence parallel over the default process group."""


def build(run: ParsedRun, device: torch.device) -> DistilledMgpuPipeline:
    options = {**run.pipeline_options(), "device": device}
    return DistilledMgpuPipeline(run.checkpoint_path, run.spatial_upsampler_path, run.gemma_root, **options)


def main(argv: Sequence[str] | None = None) -> int:
    cli = PipelineCli(
        prog="python -m ltx_pipelines.distilled_mgpu",
        description=__doc__.splitlines()[0] if __doc__ else None,
        layout=DISTILLED_LAYOUT,
    )
    return main_mgpu(cli, argv, build=build)


if __name__ == "__main__":
    sys.exit(main())
