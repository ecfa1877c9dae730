"""The pipeline class of `python -m ltx_pipelines.ti2vid_one_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

from ltx_pipelines.pipelines.guided import GuidedPipeline


class TI2VidOneStagePipeline(GuidedPipeline):
    """One guided stage at full resolution over a full (non-distilled) checkpoint and Gemma: the guided
    pipeline with the model version's guidance, Euler steps and the default schedule.

    Construct with `(checkpoint_path, gemma_root, max_batch_size=..., **PipelineOptions)`; call with a
    prompt (`video=VideoRequest(...)`, `guidance=GuidanceRequest(...)`, `conditions=StageConditions(...)`)
    or drive `latents_from_contexts` directly.
    """
