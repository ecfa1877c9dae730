"""Prompt encoding as the pipelines use it: Gemma (freed afterwards), then the checkpoint's text stage."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from ltx_core.loader import CheckpointError, Component, ModelFiles
from ltx_core.loader.model_files import ModelSource
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.text_encoders.gemma.resident import ResidentTextEncoders
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.stage_blocks import ImageCondition
from ltx_pipelines.io import read_image_rgb

logger = logging.getLogger(__name__)


def encode_prompt(
    prompts: Sequence[str],
    *,
    gemma_root: Path,
    checkpoint: ModelSource,
    placement: Placement,
    enhance: bool = False,
    images: Sequence[ImageCondition] = (),
    seed: int = 0,
    text_encoder_mode: str = "full",
    gemma_8bit: bool = False,
    enhancer_root: Path | None = None,
    resident: ResidentTextEncoders | None = None,
) -> tuple[TextContexts, str]:
    """Encode prompts with Gemma (freed afterwards) and the checkpoint's text stage (`checkpoint`: the
    single file, a diffusers folder - its `connectors/` - or a set of model files).

    With `enhance`, Gemma first rewrites prompts[0] (looking at the first conditioning image, if any): the
    Gemma at `enhancer_root` when given (loaded and freed before the text encoder), else the text encoder.
    `text_encoder_mode` (full | fp8 | stream-ram | stream-disk, `ltx_core.text_encoders.gemma.modes`): how
    Gemma is held (streamed: the same contexts with one layer on the device; fp8: close contexts);
    `gemma_8bit` loads its 8-bit (LLM.int8()) form instead (CUDA and bitsandbytes; close contexts).
    `resident`: Gemma is taken from (and kept in) that pool instead of loaded and freed.
    Returns the contexts (one row per prompt) and the prompt actually used.
    """
    from ltx_core.text_encoders.gemma.prompt_encoding import PromptEnhancement, encode_text_prompts

    enhancement = None
    if enhance:
        first = min(images, key=lambda i: i.frame_idx) if images else None
        image = read_image_rgb(first.path) if first is not None and first.path is not None else None
        enhancement = PromptEnhancement(image=image, seed=seed, gemma_root=enhancer_root)
    try:
        encoded = encode_text_prompts(
            list(prompts),
            gemma_root=gemma_root,
            checkpoint=checkpoint,
            dtype=placement.dtype,
            device=placement.device,
            enhancement=enhancement,
            mode=text_encoder_mode,
            load_in_8bit=gemma_8bit,
            resident=resident,
        )
    except CheckpointError as e:
        # Usually a Gemma folder of another size than the checkpoint's: name both files.
        raise CheckpointError(
            f"encoding the prompt with the Gemma folder {str(gemma_root)!r} and the text stage of "
            f"{str(checkpoint)!r} failed: {e}; pass the Gemma 3 folder this checkpoint was made for (--gemma-root)"
        ) from e
    if enhance:
        logger.info("enhanced prompt: %s", encoded.prompts[0])
    return encoded.contexts, encoded.prompts[0]


def text_encoder_of(checkpoint: ModelSource) -> Path | None:
    """The text encoder a set of model files names (e.g. LTX-2.5's packed Gemma 4 file), for a pipeline
    given no `gemma_root`; None for paths (a single file or a folder carries no usable text encoder)."""
    if isinstance(checkpoint, ModelFiles) and checkpoint.has(Component.TEXT_ENCODER):
        return checkpoint.source(Component.TEXT_ENCODER).path
    return None
