"""The pipeline class of `python -m ltx_pipelines.ti2vid_two_stages`
(what it does: that module's docstring)."""

from __future__ import annotations

from ltx_pipelines.pipelines.guided import TwoStageGuidedPipeline


class TI2VidTwoStagesPipeline(TwoStageGuidedPipeline):
    """Guided half-resolution stage 1, x2 latent upsampling, distilled-LoRA stage 2 at full resolution.

    `loras` are fused into both stages, `distilled_lora` into stage 2 only. Without a distilled LoRA
    (the demo) stage 2 runs the plain full model, which is not what it was tuned for.
    """
