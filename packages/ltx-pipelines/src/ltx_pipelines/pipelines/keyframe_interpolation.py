"""Keyframe interpolation, two stages with a full checkpoint: `python -m ltx_pipelines.keyframe_interpolation`.

Each `--image PATH FRAME_IDX STRENGTH [CRF]` is a keyframe at any pixel frame: its VAE latent is
appended to the video tokens as guiding tokens (positioned at that frame, denoise mask 1 - strength)
in both stages - frame 0 included, which is never substituted into the generated grid - and the
appended tokens are dropped after each stage. Stage 1 runs guided at half resolution, stage 2
refines at full resolution with the distilled LoRA fused in; unlike the text/image-to-video two-stage
pipeline, the audio that stage 2 refines is the one decoded.
"""

from __future__ import annotations

from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline


class KeyframeInterpolationPipeline(TI2VidTwoStagesPipeline):
    """Two-stage generation between keyframes given as `ImageCondition`s (any frame, any strength).

    The models, stages, options and call of `TI2VidTwoStagesPipeline` (`loras` in both stages,
    `distilled_lora` in stage 2); only what the images become and which audio is decoded differ: every image
    (frame 0 too) is appended as keyframe tokens, and stage 2's audio is decoded.
    """

    images_as_keyframes = True
    ship_refined_audio = True
