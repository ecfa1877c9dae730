"""The pipeline class of `python -m ltx_pipelines.keyframe_interpolation`
(what it does: that module's docstring)."""

from __future__ import annotations

from ltx_pipelines.pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline


class KeyframeInterpolationPipeline(TI2VidTwoStagesPipeline):
    """Two-stage generation between keyframes given as `ImageCondition`s (any frame, any strength).

    The models, stages, options and call of `TI2VidTwoStagesPipeline` (`loras` in both stages,
    `distilled_lora` in stage 2); only what the images become and which audio is decoded differ: every image
    (frame 0 too) is appended as keyframe tokens, and stage 2's audio is decoded.
    """

    images_as_keyframes = True
    ship_refined_audio = True
