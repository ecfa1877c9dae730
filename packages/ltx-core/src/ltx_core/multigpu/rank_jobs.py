"""Work that runs inside spawned ranks; module-level so the spawn start method can import it."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ltx_core.model.transformer.model import LTXModel, Modality
from ltx_core.multigpu.sequence_parallel import SequenceParallelTransformer


def sequence_parallel_forward_job(
    rank: int, world: int, model: LTXModel, cases: list[tuple[Modality | None, Modality | None]], out_path: str
) -> None:
    """Run every (video, audio) case through the sequence-parallel model; rank 0 saves the outputs
    (a list of (video, audio) velocities) to `out_path` with torch.save, via a temporary name."""
    parallel = SequenceParallelTransformer(model.eval())
    outputs = []
    with torch.inference_mode():
        for video, audio in cases:
            outputs.append(parallel(video, audio))
    if rank == 0:
        target = Path(out_path)
        partial = target.with_name(target.name + ".partial")
        torch.save(outputs, partial)
        os.replace(partial, target)
