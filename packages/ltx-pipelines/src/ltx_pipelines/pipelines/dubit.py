"""The pipeline class of `python -m ltx_pipelines.dubit`
(what it does: that module's docstring)."""

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
