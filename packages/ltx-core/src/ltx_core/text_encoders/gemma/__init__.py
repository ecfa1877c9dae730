"""Gemma text encoder (Gemma 3 folders, packed Gemma 4 files), prompt enhancement, feature extraction
and the embeddings connectors.

Names from the text embeddings stage (`embeddings_processor`) and from modules that import it
are loaded on first access, so the Gemma wrapper is usable on its own.
"""

from __future__ import annotations

import importlib
from typing import Any

from ltx_core.text_encoders.gemma.folder import GemmaFolder, locate_gemma_folder
from ltx_core.text_encoders.gemma.packed import PackedGemma, read_packed_gemma
from ltx_core.text_encoders.gemma.prompt_enhancer import (
    DEFAULT_ENHANCE_SEED,
    EnhancementSettings,
    clean_enhanced_prompt,
    enhance_prompt,
)
from ltx_core.text_encoders.gemma.system_prompts import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from ltx_core.text_encoders.gemma.text_encoder import GemmaHiddenStates, GemmaTextEncoder, build_text_encoder
from ltx_core.text_encoders.gemma.tiny import build_tiny_gemma_folder
from ltx_core.text_encoders.gemma.tiny_packed import build_tiny_packed_gemma4
from ltx_core.text_encoders.gemma.tokenizer import DEFAULT_MAX_LENGTH, GemmaPromptTokenizer, TokenizedPrompts

_LAZY = {
    "EmbeddingsProcessor": "embeddings_processor",
    "TextContexts": "embeddings_processor",
    "TEXT_EMBEDDINGS": "embeddings_processor",
    "text_embeddings_spec": "embeddings_processor",
    "EncodedPrompts": "prompt_encoding",
    "PromptEnhancement": "prompt_encoding",
    "build_text_embeddings": "prompt_encoding",
    "context_row": "prompt_encoding",
    "contexts_from_hidden_states": "prompt_encoding",
    "encode_prompts": "prompt_encoding",
    "encode_text_prompts": "prompt_encoding",
    "encode_prompts_from_files": "prompt_encoding",
    "TEXT_ENCODER_MODES": "modes",
    "text_encoder_mode_for": "modes",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "DEFAULT_ENHANCE_SEED",
    "DEFAULT_MAX_LENGTH",
    "IMAGE_TO_VIDEO",
    "TEXT_EMBEDDINGS",
    "TEXT_ENCODER_MODES",
    "TEXT_TO_VIDEO",
    "EmbeddingsProcessor",
    "EncodedPrompts",
    "EnhancementSettings",
    "GemmaFolder",
    "GemmaHiddenStates",
    "GemmaPromptTokenizer",
    "GemmaTextEncoder",
    "PackedGemma",
    "PromptEnhancement",
    "TextContexts",
    "TokenizedPrompts",
    "build_text_embeddings",
    "build_text_encoder",
    "build_tiny_gemma_folder",
    "build_tiny_packed_gemma4",
    "clean_enhanced_prompt",
    "context_row",
    "contexts_from_hidden_states",
    "encode_prompts",
    "encode_prompts_from_files",
    "encode_text_prompts",
    "enhance_prompt",
    "locate_gemma_folder",
    "read_packed_gemma",
    "text_encoder_mode_for",
]
