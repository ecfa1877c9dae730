"""Automatic captions for training clips: one interface, several backends (OpenAI-compatible server,
Gemini API, local transformers model), and a tolerant parser for what the models answer."""

from ltx_trainer.captioning.base import DEFAULT_INSTRUCTION, Captioner, MediaSample, load_media_sample
from ltx_trainer.captioning.parsing import parse_caption

__all__ = ["DEFAULT_INSTRUCTION", "Captioner", "MediaSample", "load_media_sample", "parse_caption"]
