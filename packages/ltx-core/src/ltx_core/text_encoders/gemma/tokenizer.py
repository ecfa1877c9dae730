"""Prompt tokenisation for the text encoder: fixed length, padding on the left, a leading <bos>."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

logger = logging.getLogger(__name__)

# LTX-2 text contexts are 1024 tokens long (a multiple of the connectors' 128 registers).
DEFAULT_MAX_LENGTH = 1024


@dataclass(frozen=True)
class TokenizedPrompts:
    """`input_ids` and `attention_mask` (1 = real token), both (B, max_length) int64, padding first."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor


class GemmaPromptTokenizer:
    """Wraps a Hugging Face tokenizer to give every prompt the same layout: `max_length` tokens, the
    prompt's tokens at the end (left padding keeps the last real token last, as a causal model
    reads it), starting with <bos>, without <eos>."""

    def __init__(self, tokenizer: Any, max_length: int = DEFAULT_MAX_LENGTH) -> None:
        if not isinstance(max_length, int) or max_length < 2:
            raise ValueError(f"max_length must be an integer >= 2, got {max_length!r}")
        if tokenizer.bos_token_id is None:
            raise ValueError("the Gemma tokenizer defines no <bos> token; prompts must start with one")
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad_id is None:
            raise ValueError("the Gemma tokenizer defines neither a pad nor an eos token to pad prompts with")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.bos_id = int(tokenizer.bos_token_id)
        self.pad_id = int(pad_id)

    def token_ids(self, prompt: str) -> list[int]:
        """The prompt's token ids (stripped text, leading <bos>), cut to `max_length`."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompts must be strings, got {type(prompt).__name__}")
        ids = list(self.tokenizer(prompt.strip(), add_special_tokens=True)["input_ids"])
        if not ids or ids[0] != self.bos_id:
            ids.insert(0, self.bos_id)
        if len(ids) > self.max_length:
            logger.warning(
                "prompt is %d tokens long; only the first %d are used: %.60r...", len(ids), self.max_length, prompt
            )
            ids = ids[: self.max_length]
        return ids

    def __call__(self, prompts: Sequence[str]) -> TokenizedPrompts:
        if isinstance(prompts, str):
            prompts = [prompts]
        if len(prompts) == 0:
            raise ValueError("no prompts to tokenize")
        rows = [self.token_ids(p) for p in prompts]
        input_ids = torch.full((len(rows), self.max_length), self.pad_id, dtype=torch.int64)
        attention_mask = torch.zeros((len(rows), self.max_length), dtype=torch.int64)
        for i, ids in enumerate(rows):
            input_ids[i, self.max_length - len(ids) :] = torch.tensor(ids, dtype=torch.int64)
            attention_mask[i, self.max_length - len(ids) :] = 1
        return TokenizedPrompts(input_ids=input_ids, attention_mask=attention_mask)
