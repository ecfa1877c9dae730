"""Prompts -> the text contexts the transformer cross-attends to.

Gemma produces all hidden states for the batch of prompts in one forward; the checkpoint's text
embeddings stage (feature extractor + connectors, `EmbeddingsProcessor`) turns them into the
video and audio contexts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltx_core.loader import Component, ComponentSource, ModelFiles, build_model, free_model_weights
from ltx_core.loader.builder import component_source
from ltx_core.loader.model_files import check_text_encoder_version
from ltx_core.text_encoders.gemma.embeddings_processor import EmbeddingsProcessor, TextContexts, text_embeddings_spec
from ltx_core.text_encoders.gemma.prompt_enhancer import DEFAULT_ENHANCE_SEED, EnhancementSettings, enhance_prompt
from ltx_core.text_encoders.gemma.resident import ResidentTextEncoders
from ltx_core.text_encoders.gemma.text_encoder import GemmaHiddenStates, GemmaTextEncoder
from ltx_core.text_encoders.gemma.tokenizer import DEFAULT_MAX_LENGTH

logger = logging.getLogger(__name__)


def _placement(module: nn.Module) -> tuple[torch.device, torch.dtype]:
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.is_floating_point():
            return tensor.device, tensor.dtype
    return torch.device("cpu"), torch.float32


def contexts_from_hidden_states(hidden: GemmaHiddenStates, embeddings_processor: EmbeddingsProcessor) -> TextContexts:
    """Run the text embeddings stage on Gemma's output, moved to the stage's device and dtype."""
    device, dtype = _placement(embeddings_processor)
    hidden_states = [h.to(device=device, dtype=dtype) for h in hidden.hidden_states]
    with torch.inference_mode():
        return embeddings_processor(hidden_states, hidden.attention_mask.to(device))


def encode_prompts(
    prompts: Sequence[str], gemma: GemmaTextEncoder, embeddings_processor: EmbeddingsProcessor
) -> TextContexts:
    """Contexts for every prompt (row i = prompts[i]), e.g. [positive, negative] in one Gemma forward."""
    return contexts_from_hidden_states(gemma.encode(prompts), embeddings_processor)


def build_text_embeddings(
    checkpoint: str | Path | ComponentSource | ModelFiles,
    gemma: GemmaTextEncoder,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> EmbeddingsProcessor:
    """The checkpoint's text embeddings stage, sized for this Gemma's hidden width and state count."""
    spec = text_embeddings_spec(gemma.hidden_size, gemma.num_hidden_states)
    return build_model(spec, checkpoint, dtype=dtype, device=device)


def context_row(contexts: TextContexts, index: int) -> TextContexts:
    """The contexts of one prompt of a batch, keeping the batch axis (1, S, D)."""
    batch = contexts.video.shape[0]
    if not -batch <= index < batch:
        raise IndexError(f"prompt index {index} is out of range for {batch} encoded prompts")
    rows = slice(index % batch, index % batch + 1)
    audio = contexts.audio[rows] if contexts.audio is not None else None
    return TextContexts(video=contexts.video[rows], audio=audio, mask=contexts.mask[rows])


@dataclass(frozen=True)
class PromptEnhancement:
    """Ask Gemma to rewrite the first prompt before encoding (optionally looking at `image`)."""

    image: Any = None
    seed: int = DEFAULT_ENHANCE_SEED
    # None: the release's settings for the enhancer's Gemma family (`EnhancementSettings.for_model_type`).
    settings: EnhancementSettings | None = None
    # Another Gemma that rewrites the prompt (e.g. a dense Gemma 4 instruction model, a folder or a packed
    # file); None: the text encoder itself rewrites it.
    gemma_root: str | Path | None = None


@dataclass(frozen=True)
class EncodedPrompts:
    contexts: TextContexts
    prompts: tuple[str, ...]
    """The prompts actually encoded (the first one enhanced when enhancement was asked for)."""


def encode_text_prompts(
    prompts: Sequence[str],
    *,
    gemma_root: str | Path,
    checkpoint: str | Path | ComponentSource | ModelFiles,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device | None = None,
    enhancement: PromptEnhancement | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    mode: str = "full",
    load_in_8bit: bool = False,
    resident: ResidentTextEncoders | None = None,
) -> EncodedPrompts:
    """Load Gemma (a Gemma 3 folder, a GGUF Gemma 3 or a packed Gemma 4 file, held as text-encoder `mode`
    says: full, fp8, stream-ram, stream-disk; `load_in_8bit`: a folder's 8-bit form, CUDA only),
    optionally enhance prompts[0], encode all prompts in one forward, free Gemma, then run the checkpoint's
    text embeddings stage (itself freed afterwards). `checkpoint` is the single file, or a set of model
    files whose text embeddings are read. With `resident`, Gemma (and an enhancer) is taken from that pool
    and stays loaded for the next call."""

    def load_gemma(path: str | Path, **options: Any) -> Any:
        # A context manager either way: the pool's keeps the encoder, the encoder's own frees it on exit. A
        # fresh load reads a packed file's header through the model files' store (read once per run).
        if resident is not None:
            return resident.open(path, **options)
        return GemmaTextEncoder.load(path, headers=embeddings.headers, **options)

    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not prompts:
        raise ValueError("no prompts to encode")
    # The embeddings' config file is the transformer's: refuse another Gemma than it was trained with.
    embeddings = component_source(text_embeddings_spec(), checkpoint)
    check_text_encoder_version(
        embeddings.read_metadata(), gemma_root, transformer_name=str(embeddings.path), headers=embeddings.headers
    )
    if enhancement is not None and enhancement.gemma_root is not None:
        # The enhancer is loaded, used and freed before the text encoder: one Gemma in memory at a time.
        with load_gemma(
            enhancement.gemma_root, dtype=dtype, device=device, max_length=max_length, mode=mode
        ) as enhancer:
            prompts[0] = enhance_prompt(
                enhancer, prompts[0], enhancement.image, seed=enhancement.seed, settings=enhancement.settings
            )
        enhancement = None
    with load_gemma(
        gemma_root, dtype=dtype, device=device, max_length=max_length, mode=mode, load_in_8bit=load_in_8bit
    ) as gemma:
        if enhancement is not None:
            prompts[0] = enhance_prompt(
                gemma, prompts[0], enhancement.image, seed=enhancement.seed, settings=enhancement.settings
            )
        hidden = gemma.encode(prompts)
        spec = text_embeddings_spec(gemma.hidden_size, gemma.num_hidden_states)
    processor = build_model(spec, checkpoint, dtype=dtype, device=device)
    try:
        contexts = contexts_from_hidden_states(hidden, processor)
    finally:
        free_model_weights(processor)
    logger.info("encoded %d prompt(s) into contexts of %d tokens", len(prompts), contexts.video.shape[1])
    return EncodedPrompts(contexts=contexts, prompts=tuple(prompts))


def encode_prompts_from_files(
    prompts: Sequence[str],
    files: ModelFiles,
    *,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device | None = None,
    enhancement: PromptEnhancement | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    mode: str = "full",
    load_in_8bit: bool = False,
) -> EncodedPrompts:
    """`encode_text_prompts` with the text encoder and the text embeddings of a set of model files."""
    files.require(Component.TEXT_ENCODER, Component.TEXT_EMBEDDINGS, purpose="prompt encoding")
    return encode_text_prompts(
        prompts,
        gemma_root=files.source(Component.TEXT_ENCODER).path,
        checkpoint=files,
        dtype=dtype,
        device=device,
        enhancement=enhancement,
        max_length=max_length,
        mode=mode,
        load_in_8bit=load_in_8bit,
    )
