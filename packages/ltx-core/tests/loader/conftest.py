"""Fixtures for loader tests: tiny modules and safetensors files written per test."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import nn


class TinyNet(nn.Module):
    """Two linears and an integer buffer: enough to exercise renaming, dtypes and strictness."""

    def __init__(self, width: int = 4, out: int = 3) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.head = nn.Linear(width, out, bias=False)
        self.register_buffer("counts", torch.zeros(2, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.proj(x))


def tiny_configurator(config: dict[str, Any]) -> nn.Module:
    section = config["tiny"]
    return TinyNet(section["width"], section["out"])


@pytest.fixture
def tiny_net_cls() -> type[TinyNet]:
    return TinyNet


@pytest.fixture
def tiny_configurator_fn() -> Callable[[dict[str, Any]], nn.Module]:
    return tiny_configurator


@pytest.fixture
def write_safetensors(tmp_path: Path) -> Callable[..., Path]:
    """write_safetensors(name, tensors, metadata=None) -> path; dict/list metadata values are JSON-encoded."""

    def write(name: str, tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> Path:
        path = tmp_path / name
        meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()}
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=meta)
        return path

    return write


@pytest.fixture
def tiny_checkpoint(write_safetensors: Callable[..., Path]) -> tuple[Path, dict[str, torch.Tensor]]:
    """A single-file-style checkpoint: the tiny net under `net.`, plus an unrelated component and a stray key."""
    torch.manual_seed(0)
    net = TinyNet()
    weights = {f"net.{k}": v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in net.state_dict().items()}
    weights["other.weight"] = torch.randn(2, 2)
    weights["net_statistics.unused"] = torch.randn(3)
    path = write_safetensors(
        "tiny.safetensors", weights, {"config": {"tiny": {"width": 4, "out": 3}}, "model_version": "2.3.0"}
    )
    return path, weights
