"""Tiny Gemma 3 folders built offline for the text encoder tests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ltx_core.text_encoders.gemma import GemmaTextEncoder, build_tiny_gemma_folder

# Short contexts keep most tests fast; the golden end-to-end test uses the real length.
SHORT_LENGTH = 128


@pytest.fixture(scope="session")
def tiny_gemma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gemma_folder(tmp_path_factory.mktemp("tiny_gemma"), hidden_size=24, num_layers=3, seed=0)


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


@pytest.fixture(scope="session")
def golden_gemma_sizes(golden_dir: Path) -> tuple[int, int]:
    """(hidden_size, num_hidden_layers) of the Gemma the golden checkpoint's text projection expects."""
    text = json.loads((golden_dir / "gemma_config.json").read_text())["text_config"]
    return int(text["hidden_size"]), int(text["num_hidden_layers"])


@pytest.fixture(scope="session")
def golden_sized_gemma_dir(golden_gemma_sizes: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> Path:
    hidden, layers = golden_gemma_sizes
    return build_tiny_gemma_folder(tmp_path_factory.mktemp("golden_gemma"), hidden_size=hidden, num_layers=layers)
