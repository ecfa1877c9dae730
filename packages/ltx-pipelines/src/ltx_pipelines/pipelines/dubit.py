"""Dub-It video-to-video, distilled two-stage: `python -m ltx_pipelines.dubit` (the LTX-2.5 name of lip-dub).

One Dub-It IC-LoRA (`--lora`, exactly once) is fused into the distilled transformer used by both stages.
The `--reference-video` conditions both: its frames as IC reference tokens (at `--reference-strength`, at the
LoRA's reference downscale factor), and its audio track, VAE-encoded, as reference audio tokens with negative
RoPE times (ending just before the clip's start), so the new speech follows the reference's timing. The frame
count is the reference's, snapped down to 8k+1; the frame rate is its container's. Stage 2 refines the video
with the stage-1 audio frozen (sigma 0 for it in the model's timestep conditioning) and referenced; the
stage-1 audio is the one written. Stage 1 is plain Euler on every model generation.

`python -m ltx_pipelines.lipdub` is the same pipeline under its LTX-2.3 name; this entry point adds the
LTX-2.5 demo family (`--demo --demo-family ltx-2.5`, which fuses the demo set's tiny Dub-It IC-LoRA unless
`--lora` names one).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ltx_core.loader import LoraSpec, ModelFiles
from ltx_pipelines.lipdub import LipDubPipeline, LipDubReference

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ltx_pipelines.engine.prompt_pipeline import PipelineOptions


__all__ = ["DubItPipeline", "DubItReference"]


DubItReference = LipDubReference


"""The reference clip (video, and its audio unless given separately); see `LipDubReference`."""


class DubItPipeline(LipDubPipeline):
    """Distilled two-stage Dub-It over one Dub-It IC-LoRA (`ic_lora`), fused into the transformer of both
    stages; `generate` -> `FinalLatents`, `latents_from_contexts` is the parity seam (see `LipDubPipeline`)."""

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        ic_lora: LoraSpec | None,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`ic_lora` None only runs the random-weight demo."""
        super().__init__(checkpoint_path, spatial_upsampler_path, gemma_root, lip_dub_lora=ic_lora, **options)
