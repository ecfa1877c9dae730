"""Fixtures for the hf:// tests: the hub library kept offline and a hub cache in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import constants as hub_constants

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def _never_online(monkeypatch):
    """Any real network call would be a test bug: make the hub library itself offline."""
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def hub_cache(tmp_path) -> Path:
    """A hub cache holding Lightricks/LTX-2 (a checkpoint) and google/gemma (a folder), at `main`."""
    cache = tmp_path / "hub"
    for repo, files in {
        "models--Lightricks--LTX-2": {"ltx-2.3-22b-distilled.safetensors": b"ckpt", "loras/style.safetensors": b"lora"},
        "models--google--gemma": {"config.json": b"{}", "tokenizer.json": b"{}", "model.safetensors": b"w"},
    }.items():
        (cache / repo / "refs").mkdir(parents=True)
        (cache / repo / "refs" / "main").write_text(COMMIT)
        for name, data in files.items():
            f = cache / repo / "snapshots" / COMMIT / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
    return cache
