"""Captions from an OpenAI-compatible chat server (e.g. vLLM serving Qwen3-Omni), over plain HTTP.

The request follows the chat-completions format multimodal servers accept: the instruction as text,
the sampled frames as `image_url` parts (JPEG data URLs), the audio track as an `input_audio` part
(16 kHz WAV, base64). Greedy decoding (temperature 0) for reproducible captions.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_trainer.captioning.base import DEFAULT_INSTRUCTION, MediaSample, load_media_sample
from ltx_trainer.captioning.parsing import parse_caption

logger = logging.getLogger(__name__)

DEFAULT_URL = "http://127.0.0.1:8001/v1"
DEFAULT_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Thinking"


class CaptionerError(RuntimeError):
    """The server could not be reached or answered with an error."""


def build_chat_request(
    sample: MediaSample, *, model: str, instruction: str, max_tokens: int, enable_thinking: bool
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": instruction}]
    for jpeg in sample.frames_jpeg:
        url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
        content.append({"type": "image_url", "image_url": {"url": url}})
    if sample.audio_wav is not None:
        data = base64.b64encode(sample.audio_wav).decode("ascii")
        content.append({"type": "input_audio", "input_audio": {"data": data, "format": "wav"}})
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "temperature": 0.0,
        "max_tokens": max_tokens,
        # vLLM passes this to the chat template; Qwen3 thinking models skip the reasoning when False.
        "chat_template_kwargs": {"enable_thinking": enable_thinking},
    }


@dataclass
class OpenAICompatibleCaptioner:
    base_url: str = DEFAULT_URL
    model: str = DEFAULT_MODEL
    instruction: str = DEFAULT_INSTRUCTION
    max_tokens: int = 4096
    fps: float = 2.0
    enable_thinking: bool = False
    api_key: str | None = None
    timeout: float = 600.0
    retries: int = 2
    name: str = "openai-compatible"

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = json.dumps(payload).encode("utf-8")
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:300]
                if e.code < 500 or attempt == self.retries:
                    raise CaptionerError(f"{url} answered HTTP {e.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == self.retries:
                    raise CaptionerError(
                        f"cannot reach the captioning server at {self.base_url} ({e}); "
                        "is it running (python -m ltx_trainer.serve_captioner) and is --vllm-url right?"
                    ) from None
            time.sleep(min(2.0**attempt, 10.0))
        raise CaptionerError("unreachable")  # pragma: no cover - the loop returns or raises

    def caption(self, media: Path) -> str:
        sample = load_media_sample(media, fps=self.fps)
        payload = build_chat_request(
            sample,
            model=self.model,
            instruction=self.instruction,
            max_tokens=self.max_tokens,
            enable_thinking=self.enable_thinking,
        )
        answer = self._post(payload)
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise CaptionerError(f"unexpected answer from {self.base_url}: {str(answer)[:300]}") from None
        return parse_caption(text or "")
