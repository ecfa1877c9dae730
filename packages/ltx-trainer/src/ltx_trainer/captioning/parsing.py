"""Turning a model's answer into a caption: reasoning blocks removed, JSON read even when truncated."""

from __future__ import annotations

import json
import re

from ltx_trainer.captioning.base import CAPTION_KEY

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)
_KEYS = (CAPTION_KEY, "caption", "description")


def _strip_reasoning(text: str) -> str:
    text = _THINK.sub("", text)
    # An answer cut off inside its reasoning, or one whose opening tag was eaten by the chat template.
    if "</think>" in text.lower():
        text = text[text.lower().rindex("</think>") + len("</think>") :]
    elif "<think>" in text.lower():
        text = text[: text.lower().index("<think>")]
    return text.strip()


def _unescape(fragment: str) -> str:
    """A JSON string body that may be cut short (an unfinished escape at the end is dropped)."""
    fragment = re.sub(r"\\u[0-9a-fA-F]{0,3}$|\\$", "", fragment)
    try:
        return json.loads(f'"{fragment}"')
    except json.JSONDecodeError:
        return fragment.replace('\\"', '"').replace("\\n", "\n")


def parse_caption(answer: str) -> str:
    """The caption in a model answer: the JSON field (complete or truncated), else the plain text.

    Raises ValueError for an answer with nothing usable (empty after removing the reasoning).
    """
    text = _strip_reasoning(answer)
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    start = text.find("{")
    if start >= 0:
        candidate = text[start:]
        try:
            data = json.loads(candidate[: candidate.rfind("}") + 1] or candidate)
            if isinstance(data, dict):
                for key in _KEYS:
                    if isinstance(data.get(key), str) and data[key].strip():
                        return data[key].strip()
        except json.JSONDecodeError:
            pass
        # Truncated JSON: take the key's string value up to its closing quote or the end of the answer.
        for key in _KEYS:
            match = re.search(rf'"{re.escape(key)}"\s*:\s*"((?:[^"\\]|\\.)*)("?)', candidate, re.DOTALL)
            if match and match.group(1).strip():
                return _unescape(match.group(1)).strip()
    plain = text.strip().strip("`").strip()
    if not plain:
        raise ValueError("the captioner's answer holds no caption (empty after removing its reasoning)")
    return plain
