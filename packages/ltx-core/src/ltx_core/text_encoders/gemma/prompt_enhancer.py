"""Prompt enhancement: Gemma rewrites a short user prompt into the detailed, audio-aware description
the LTX model was trained on; with a conditioning image it looks at that first frame too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ltx_core.text_encoders.gemma import system_prompts
from ltx_core.text_encoders.gemma.text_encoder import GemmaTextEncoder

logger = logging.getLogger(__name__)

DEFAULT_ENHANCE_SEED = 42
# Gemma likes typographic quotes and dashes; the LTX prompts are plain ASCII punctuation.
_TYPOGRAPHY = str.maketrans("\u2018\u2019\u2032\u201c\u201d\u2013\u2014\u2212\u00a0", "'''\"\"--- ")


@dataclass(frozen=True)
class EnhancementSettings:
    """Generation settings. Sampling at temperature 0.7 with up to 512 new tokens is what the LTX
    release uses with Gemma 3; the rest (top-k, top-p) comes from the folder's generation_config.json.
    With a Gemma 4 the release decodes greedily (`for_model_type`)."""

    max_new_tokens: int = 512
    do_sample: bool = True
    temperature: float = 0.7
    # The prompt is left-padded to a multiple of this (kernel-friendly lengths); 1 disables it.
    length_multiple: int = 8
    # No n-gram of this size repeats in the output (greedy decoding loops without it); None = off.
    no_repeat_ngram_size: int | None = None

    @classmethod
    def for_model_type(cls, model_type: str) -> EnhancementSettings:
        """The release's settings for a Gemma family: Gemma 3 samples; Gemma 4 is greedy, up to 600
        new tokens, with no repeated 5-gram."""
        if model_type.startswith("gemma4"):
            return cls(max_new_tokens=600, do_sample=False, no_repeat_ngram_size=5)
        return cls()

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if self.do_sample and not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 when sampling, got {self.temperature!r}")
        if self.no_repeat_ngram_size is not None and self.no_repeat_ngram_size < 1:
            raise ValueError(
                f"no_repeat_ngram_size must be a positive integer or None, got {self.no_repeat_ngram_size!r}"
            )
        if not isinstance(self.length_multiple, int) or self.length_multiple < 1:
            raise ValueError(f"length_multiple must be a positive integer, got {self.length_multiple!r}")

    def generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            kwargs["temperature"] = self.temperature
        if self.no_repeat_ngram_size is not None:
            kwargs["no_repeat_ngram_size"] = self.no_repeat_ngram_size
        return kwargs


def clean_enhanced_prompt(text: str) -> str:
    """Plain punctuation, and no leading bullets, quotes or spaces before the first letter."""
    text = text.translate(_TYPOGRAPHY).strip()
    first_letter = next((i for i, c in enumerate(text) if c.isalpha()), 0)
    return text[first_letter:]


def _as_image_array(image: Any) -> Any:
    """PIL images pass through; tensors / arrays become (H, W, 3) uint8 arrays."""
    if hasattr(image, "convert") and hasattr(image, "size"):  # a PIL image
        return image.convert("RGB")
    array = image.detach().cpu().numpy() if isinstance(image, torch.Tensor) else np.asarray(image)
    if array.ndim == 3 and array.shape[0] == 3 and array.shape[-1] != 3:
        array = array.transpose(1, 2, 0)
    if array.ndim != 3 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise ValueError(
            f"the enhancement image must be a PIL image or a uint8 (H, W, 3) / (3, H, W) array, "
            f"got dtype {array.dtype} shape {tuple(array.shape)}"
        )
    return array


def _left_pad(inputs: dict[str, torch.Tensor], multiple: int, pad_id: int) -> dict[str, torch.Tensor]:
    length = inputs["input_ids"].shape[1]
    extra = -length % multiple
    if extra == 0:
        return inputs
    padded = dict(inputs)
    fill = {"input_ids": pad_id, "attention_mask": 0, "token_type_ids": 0}
    for name, value in fill.items():
        tensor = inputs.get(name)
        if tensor is not None:
            pad = torch.full((tensor.shape[0], extra), value, dtype=tensor.dtype, device=tensor.device)
            padded[name] = torch.cat([pad, tensor], dim=1)
    return padded


def _messages(prompt: str, system_prompt: str, with_image: bool) -> list[dict[str, Any]]:
    if with_image:
        user: Any = [{"type": "image"}, {"type": "text", "text": f"User request: {prompt}"}]
    else:
        user = f"User prompt: {prompt}"
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def _model_inputs(gemma: GemmaTextEncoder, messages: list[dict[str, Any]], image: Any) -> dict[str, torch.Tensor]:
    use_processor = image is not None or (gemma.folder is not None and gemma.folder.has_image_processor)
    processor = gemma.processor() if use_processor else None
    tokenizer = processor.tokenizer if processor is not None else gemma.tokenizer.tokenizer
    template = getattr(tokenizer, "chat_template", None) or getattr(processor, "chat_template", None)
    if not template:
        raise ValueError("the Gemma folder has no chat template (chat_template.jinja); it cannot enhance prompts")
    text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True)
    if processor is not None:
        encoded = processor(text=text, images=image, return_tensors="pt")
    else:
        encoded = tokenizer(text, return_tensors="pt")
    inputs = {k: v.to(gemma.device) for k, v in encoded.items() if isinstance(v, torch.Tensor)}
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].to(gemma.dtype)
    return inputs


def enhance_prompt(
    gemma: GemmaTextEncoder,
    prompt: str,
    image: Any = None,
    *,
    seed: int = DEFAULT_ENHANCE_SEED,
    settings: EnhancementSettings | None = None,
    system_prompt: str | None = None,
) -> str:
    """Gemma's rewrite of `prompt` (text-to-video instructions, or image-to-video ones when `image`,
    the first conditioning frame, is given). Sampling is seeded without touching the global RNG."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"the prompt to enhance must be a non-empty string, got {prompt!r}")
    if image is not None:
        image = _as_image_array(image)
    settings = settings or EnhancementSettings.for_model_type(gemma.model_type)
    if system_prompt is None:
        system_prompt = system_prompts.TEXT_TO_VIDEO if image is None else system_prompts.IMAGE_TO_VIDEO
    inputs = _model_inputs(gemma, _messages(prompt, system_prompt, image is not None), image)
    pad_id = gemma.tokenizer.pad_id
    inputs = _left_pad(inputs, settings.length_multiple, pad_id)

    model = gemma.model
    rng_devices = [model.device] if model.device.type == "cuda" else []
    with torch.inference_mode(), torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(seed)
        output = model.generate(**inputs, **settings.generate_kwargs(), pad_token_id=pad_id)
    new_tokens = output[0, inputs["input_ids"].shape[1] :]
    raw = gemma.tokenizer.tokenizer.decode(new_tokens, skip_special_tokens=True)
    enhanced = clean_enhanced_prompt(raw)
    if not enhanced:
        logger.warning("prompt enhancement produced no text; keeping the original prompt")
        return prompt
    logger.info("enhanced prompt: %s", enhanced)
    return enhanced
