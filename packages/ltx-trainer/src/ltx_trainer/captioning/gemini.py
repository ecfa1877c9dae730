"""Captions from the Gemini API (`google-genai`, an optional dependency: `ltx-trainer[gemini]`).

The whole file is sent inline (video with its audio track), so the model hears what it sees. The
API key comes from --api-key, GEMINI_API_KEY or GOOGLE_API_KEY; without one the client uses Vertex AI
with the machine's Google Cloud credentials.
"""

from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_trainer.captioning.base import DEFAULT_INSTRUCTION
from ltx_trainer.captioning.parsing import parse_caption

DEFAULT_GEMINI_MODEL = "gemini-3.5-flash"
MAX_INLINE_BYTES = 20 * 1024 * 1024  # the API's limit for inline request data


def gemini_api_key(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")


def build_gemini_request(media: Path, *, model: str, instruction: str, max_tokens: int) -> dict[str, Any]:
    """Keyword arguments for `client.models.generate_content` (plain dicts the SDK validates)."""
    data = Path(media).read_bytes()
    if len(data) > MAX_INLINE_BYTES:
        raise ValueError(
            f"{str(media)!r} is {len(data) / 2**20:.1f} MiB; the Gemini captioner sends files inline, "
            "at most 20 MiB (split long videos first with split_scenes)"
        )
    mime = mimetypes.guess_type(str(media))[0] or "video/mp4"
    return {
        "model": model,
        "contents": [
            {"role": "user", "parts": [{"inline_data": {"mime_type": mime, "data": data}}, {"text": instruction}]}
        ],
        "config": {"temperature": 0.0, "max_output_tokens": max_tokens, "response_mime_type": "application/json"},
    }


@dataclass
class GeminiCaptioner:
    model: str = DEFAULT_GEMINI_MODEL
    instruction: str = DEFAULT_INSTRUCTION
    max_tokens: int = 4096
    api_key: str | None = None
    name: str = "gemini"
    _client: Any = field(default=None, repr=False)

    def client(self) -> Any:
        if self._client is None:
            try:
                from google import genai
            except ImportError:
                raise ImportError(
                    "the Gemini captioner needs google-genai: install the extra with "
                    "`uv pip install 'ltx-trainer[gemini]'` (or `pip install google-genai`)"
                ) from None
            key = gemini_api_key(self.api_key)
            self._client = genai.Client(api_key=key) if key else genai.Client(vertexai=True)
        return self._client

    def caption(self, media: Path) -> str:
        request = build_gemini_request(
            media, model=self.model, instruction=self.instruction, max_tokens=self.max_tokens
        )
        response = self.client().models.generate_content(**request)
        return parse_caption(getattr(response, "text", None) or "")
