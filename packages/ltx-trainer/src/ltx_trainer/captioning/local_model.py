"""Captions from a local vision-language model through transformers (image-text-to-text models).

The model sees the sampled frames as images in one chat turn; sound is not used (most local VLMs
have no audio input). transformers is imported when the captioner is first used.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_trainer.captioning.base import DEFAULT_INSTRUCTION, MediaSample, load_media_sample
from ltx_trainer.captioning.parsing import parse_caption


def build_vlm_messages(sample: MediaSample, instruction: str) -> list[dict[str, Any]]:
    """One user turn: every frame as an image part, then the instruction (the chat-template format)."""
    from PIL import Image

    parts: list[dict[str, Any]] = [
        {"type": "image", "image": Image.open(io.BytesIO(jpeg)).convert("RGB")} for jpeg in sample.frames_jpeg
    ]
    parts.append({"type": "text", "text": instruction})
    return [{"role": "user", "content": parts}]


@dataclass
class TransformersCaptioner:
    model_id: str
    instruction: str = DEFAULT_INSTRUCTION
    max_tokens: int = 1024
    fps: float = 1.0
    device: str | None = None
    name: str = "transformers"
    _loaded: tuple[Any, Any] | None = field(default=None, repr=False)

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor

            from ltx_core.devices import resolve_device

            device = resolve_device(self.device)
            dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
            processor = AutoProcessor.from_pretrained(self.model_id)
            model = AutoModelForImageTextToText.from_pretrained(self.model_id, dtype=dtype).to(device).eval()
            self._loaded = (processor, model)
        return self._loaded

    def caption(self, media: Path) -> str:
        import torch

        processor, model = self._load()
        messages = build_vlm_messages(load_media_sample(media, fps=self.fps, with_audio=False), self.instruction)
        inputs = processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        ).to(model.device)
        with torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=self.max_tokens, do_sample=False)
        answer = processor.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        return parse_caption(answer)
