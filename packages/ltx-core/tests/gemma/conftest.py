"""Tiny Gemma 3 folders built offline for the text encoder tests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.loader.key_rules import AUDIO_CONNECTOR_PREFIX, TEXT_PROJECTION_PREFIX, VIDEO_CONNECTOR_PREFIX
from ltx_core.text_encoders.gemma import GemmaTextEncoder, build_tiny_gemma_folder
from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec

# Short contexts keep most tests fast; the full-length encoding test uses the real length.
SHORT_LENGTH = 128


@pytest.fixture(scope="session")
def tiny_gemma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gemma_folder(
        tmp_path_factory.mktemp("tiny_gemma"), hidden_size=TINY_GEMMA_HIDDEN, num_layers=TINY_GEMMA_LAYERS, seed=0
    )


@pytest.fixture(scope="session")
def tiny_gemma(tiny_gemma_dir: Path) -> GemmaTextEncoder:
    """Shared float32 CPU encoder with short contexts; tests must not release it."""
    return GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu", max_length=SHORT_LENGTH)


@pytest.fixture
def short_length() -> int:
    return SHORT_LENGTH


@pytest.fixture
def gemma_copy(tiny_gemma_dir: Path, tmp_path: Path) -> Callable[[], Path]:
    """A fresh, editable copy of the tiny folder."""

    def copy(name: str = "gemma") -> Path:
        return Path(shutil.copytree(tiny_gemma_dir, tmp_path / name))

    return copy


# The tiny Gemma's sizes, and a text path (LTX-2.3 layout: projection before the connectors) that fits it.
TINY_GEMMA_HIDDEN, TINY_GEMMA_LAYERS = 24, 3
TINY_TEXT_PATH: dict[str, Any] = {
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "audio_cross_attention_dim": 8,
    "caption_channels": TINY_GEMMA_HIDDEN,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "connector_num_attention_heads": 2,
    "connector_attention_head_dim": 8,
    "audio_connector_num_attention_heads": 2,
    "audio_connector_attention_head_dim": 4,
    "connector_num_layers": 1,
    "connector_positional_embedding_max_pos": [4096],
    "connector_num_learnable_registers": 8,
    "connector_apply_gated_attention": True,
    "frequencies_precision": "float64",
    "rope_type": "split",
    "text_encoder_norm_type": "per_token_rms",
}
# Module prefix of the text embeddings stage -> the released single-file prefix (inverse of the key rules).
_FILE_PREFIXES = {
    "video_connector.": VIDEO_CONNECTOR_PREFIX,
    "audio_connector.": AUDIO_CONNECTOR_PREFIX,
    "feature_extractor.": TEXT_PROJECTION_PREFIX,
}


@pytest.fixture(scope="session")
def tiny_gemma_sizes() -> tuple[int, int]:
    """(hidden_size, num_hidden_layers) of `tiny_gemma_dir`, which `tiny_text_checkpoint` fits."""
    return TINY_GEMMA_HIDDEN, TINY_GEMMA_LAYERS


@pytest.fixture(scope="session")
def tiny_text_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A single-file checkpoint holding only the text embeddings stage (projection and both connectors,
    random weights) under the released key prefixes, with its `transformer` config section."""
    return write_tiny_text_checkpoint(tmp_path_factory.mktemp("text_checkpoint"), TINY_GEMMA_HIDDEN, TINY_GEMMA_LAYERS)


def write_tiny_text_checkpoint(folder: Path, hidden_size: int, num_layers: int) -> Path:
    """`tiny_text_checkpoint` for a Gemma of `hidden_size` and `num_layers`, written in `folder`."""
    spec = text_embeddings_spec(hidden_size, num_layers + 1)  # hidden states include the embeddings
    config = {"transformer": {**TINY_TEXT_PATH, "caption_channels": hidden_size}}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        processor = spec.configurator(config)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():  # non-trivial values everywhere, registers and norms included
            for parameter in processor.parameters():
                parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))
    tensors = {}
    for key, value in processor.state_dict().items():
        prefix = next(p for p in _FILE_PREFIXES if key.startswith(p))
        tensors[_FILE_PREFIXES[prefix] + key.removeprefix(prefix)] = value.contiguous()
    path = folder / "text-only.safetensors"
    save_file(tensors, str(path), metadata={"config": json.dumps(config)})
    return path
