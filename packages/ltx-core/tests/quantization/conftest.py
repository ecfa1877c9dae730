"""A tiny random transformer for the quantization tests (no files)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from ltx_core.model.transformer import LTXModel, configure_transformer

_TINY = {
    "num_layers": 1,
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "in_channels": 16,
    "out_channels": 16,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "audio_cross_attention_dim": 8,
    "audio_in_channels": 8,
    "audio_out_channels": 8,
    "apply_gated_attention": True,
    "cross_attention_adaln": True,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
}


@pytest.fixture
def make_model_for_blockwise() -> Callable[[], LTXModel]:
    def make() -> LTXModel:
        torch.manual_seed(0)
        model = configure_transformer({"transformer": dict(_TINY)})
        return model.to_empty(device="cpu").requires_grad_(False)

    return make
