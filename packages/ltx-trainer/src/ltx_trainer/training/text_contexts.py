"""Precomputed text features -> the transformer's text contexts, with the checkpoint's embeddings connectors.

Preprocessing stores the feature extractor's output (before the connectors), so training needs only the
two connectors: the rows are re-ordered so valid tokens come first, each connector turns features into a
context (padding slots become learnable registers) and the video context is multiplied by the returned
mask, exactly as `EmbeddingsProcessor.forward` does after feature extraction.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ltx_core.loader import ComponentSpec, SDOps
from ltx_core.loader.key_rules import AUDIO_CONNECTOR_PREFIX, VIDEO_CONNECTOR_PREFIX
from ltx_core.text_encoders.gemma.connector import EmbeddingsConnector
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts, connector_configs, valid_first_order


class TextConnectors(nn.Module):
    def __init__(self, video: EmbeddingsConnector, audio: EmbeddingsConnector | None) -> None:
        super().__init__()
        self.video_connector = video
        self.audio_connector = audio

    def forward(
        self, video_features: torch.Tensor, audio_features: torch.Tensor | None, attention_mask: torch.Tensor
    ) -> TextContexts:
        order = valid_first_order(attention_mask)
        valid = torch.gather(attention_mask.bool(), 1, order)

        def gathered(x: torch.Tensor) -> torch.Tensor:
            return torch.gather(x, 1, order[:, :, None].expand(-1, -1, x.shape[-1]))

        video, mask = self.video_connector(gathered(video_features), valid)
        video = video * mask[:, :, None].to(video.dtype)
        audio = None
        if self.audio_connector is not None:
            if audio_features is None:
                raise ValueError(
                    "the conditions/ files hold no audio_prompt_embeds, but the checkpoint has an audio connector; "
                    "re-run process_captions with this checkpoint"
                )
            audio, _ = self.audio_connector(gathered(audio_features), valid)
        return TextContexts(video=video, audio=audio, mask=mask.to(torch.int64))


def text_connectors_spec(with_audio: bool = True) -> ComponentSpec:
    def configurator(config: dict[str, Any]) -> TextConnectors:
        video_cfg, audio_cfg = connector_configs(config["transformer"])
        return TextConnectors(EmbeddingsConnector(video_cfg), EmbeddingsConnector(audio_cfg) if with_audio else None)

    ops = SDOps("text_connectors").keeping(prefix=VIDEO_CONNECTOR_PREFIX)
    if with_audio:
        ops = ops.keeping(prefix=AUDIO_CONNECTOR_PREFIX)
    ops = ops.renaming_prefix(VIDEO_CONNECTOR_PREFIX, "video_connector.").renaming_prefix(
        AUDIO_CONNECTOR_PREFIX, "audio_connector."
    )
    return ComponentSpec(
        name="text embeddings connectors",
        ops=ops,
        configurator=configurator,
        config_section="transformer",
        expected_kind="an LTX-2.3 single-file checkpoint (embeddings connectors)",
    )
