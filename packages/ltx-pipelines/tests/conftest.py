"""Fixtures for the pipeline utilities: tiny model files, images and media written per test."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file


def _write_safetensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> Path:
    meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()}
    save_file(tensors, str(path), metadata=meta)
    return path


@dataclass(frozen=True)
class ModelFiles:
    """Tiny stand-ins with the metadata and key layout of each released file kind."""

    checkpoint: Path
    checkpoint_v20: Path
    checkpoint_v24: Path
    upsampler: Path
    temporal_upsampler: Path
    lora: Path
    gemma_root: Path
    image: Path
    not_safetensors: Path


def write_ltx_checkpoint(path: Path, version: str | None = "2.3.0") -> Path:
    config = {
        "transformer": {"_class_name": "AVTransformer3DModel", "num_layers": 48},
        "vae": {"_class_name": "CausalVideoAutoencoder"},
        "audio_vae": {"model": {}},
        "vocoder": {},
    }
    metadata: dict[str, Any] = {"config": config}
    if version is not None:
        metadata["model_version"] = version
    tensors = {
        "model.diffusion_model.patchify_proj.weight": torch.zeros(4, 4),
        # What the stand-in LoRA targets (LoRAs are checked against the checkpoint's header).
        "model.diffusion_model.transformer_blocks.0.attn1.to_q.weight": torch.zeros(4, 4),
        "vae.decoder.conv_in.conv.weight": torch.zeros(2, 2),
    }
    return _write_safetensors(path, tensors, metadata)


def write_upsampler(path: Path, *, spatial: bool = True) -> Path:
    config = {
        "_class_name": "LatentUpsampler",
        "in_channels": 128,
        "spatial_upsample": spatial,
        "temporal_upsample": not spatial,
        "spatial_scale": 2.0,
    }
    return _write_safetensors(path, {"initial_conv.weight": torch.zeros(2, 2)}, {"config": config})


def write_lora(path: Path) -> Path:
    base = "diffusion_model.transformer_blocks.0.attn1.to_q"
    tensors = {f"{base}.lora_A.weight": torch.zeros(2, 4), f"{base}.lora_B.weight": torch.zeros(4, 2)}
    return _write_safetensors(path, tensors)


def write_gemma_root(root: Path) -> Path:
    """A folder that passes the Gemma folder check (config, tokenizer, sharded weights); its contents are
    placeholders, so it cannot be loaded."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    (root / "tokenizer.json").write_text("{}")
    (root / "tokenizer_config.json").write_text("{}")
    shard = "model-00001-of-00001.safetensors"
    _write_safetensors(root / shard, {"w": torch.zeros(1)})
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))
    return root


def write_image(path: Path, size: tuple[int, int] = (48, 32), color: tuple[int, int, int] = (200, 40, 90)) -> Path:
    Image.new("RGB", size, color).save(path)
    return path


@pytest.fixture
def model_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelFiles:
    """Header-only model files. The checkpoints declare the released 22B sizes, which no test machine's RAM
    holds, so the command line's memory check is off where they are used (it has its own tests in
    test_runtime_flags.py and test_t2a_one_stage.py)."""
    monkeypatch.setattr("ltx_core.devices.available_memory", lambda device: None)
    models = tmp_path / "models"
    models.mkdir()
    junk = models / "notes.safetensors"
    junk.write_bytes(b"this is not a safetensors file at all")
    return ModelFiles(
        checkpoint=write_ltx_checkpoint(models / "ltx-2.3-22b-distilled.safetensors", "2.3.0"),
        checkpoint_v20=write_ltx_checkpoint(models / "ltx-2-19b-dev.safetensors", None),
        checkpoint_v24=write_ltx_checkpoint(models / "ltx-2.4-dev.safetensors", "2.4-rc1"),
        upsampler=write_upsampler(models / "spatial-upscaler-x2.safetensors"),
        temporal_upsampler=write_upsampler(models / "temporal-upscaler-x2.safetensors", spatial=False),
        lora=write_lora(models / "style-lora.safetensors"),
        gemma_root=write_gemma_root(models / "gemma"),
        image=write_image(models / "first.png"),
        not_safetensors=junk,
    )


@pytest.fixture
def make_frames() -> Callable[..., torch.Tensor]:
    """make_frames(n, h, w, seed) -> (n, h, w, 3) float in [0, 1]: smooth gradients that compress well."""

    def make(n: int, h: int, w: int, seed: int = 0) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        ys = torch.linspace(0, 1, h).view(1, h, 1, 1)
        xs = torch.linspace(0, 1, w).view(1, 1, w, 1)
        ts = torch.linspace(0, 1, max(n, 1)).view(n, 1, 1, 1)
        phase = torch.rand(1, 1, 1, 3, generator=g)
        return (0.5 + 0.4 * torch.sin(6.0 * (ys + xs + ts) + 6.28 * phase)).clamp(0, 1)

    return make


@pytest.fixture
def stereo_tone() -> Callable[[int, int], torch.Tensor]:
    """stereo_tone(n, rate) -> (2, n) float waveform: 440 Hz left, 660 Hz right, amplitude 0.5."""

    def tone(n: int, rate: int) -> torch.Tensor:
        t = torch.arange(n, dtype=torch.float64) / rate
        return torch.stack([0.5 * torch.sin(2 * np.pi * 440 * t), 0.5 * torch.sin(2 * np.pi * 660 * t)]).float()

    return tone


@pytest.fixture(scope="session")
def demo_model_files(tmp_path_factory: pytest.TempPathFactory):
    """The demo's tiny random models (checkpoint, x2 upsampler, Gemma folder), built once per session in a
    temporary folder (never the user's cache)."""
    from ltx_pipelines.demo import ensure_demo_assets

    return ensure_demo_assets(tmp_path_factory.mktemp("demo-models"))


@pytest.fixture(scope="session")
def ltx25_demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test-owned `XDG_CACHE_HOME` whose LTX-2.5 demo set (split component files) is already built, for
    `--demo --demo-family ltx-2.5` runs and the component-file flags (set it with monkeypatch)."""
    from ltx_pipelines.demo import default_demo_dir, ensure_demo_assets

    home = tmp_path_factory.mktemp("xdg_cache_ltx25")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(home))
        ensure_demo_assets(default_demo_dir("ltx-2.5"), family="ltx-2.5")
    return home


@pytest.fixture(scope="session")
def ltx25_demo(ltx25_demo_home: Path):
    """The LTX-2.5 demo set (`Ltx25DemoAssets`) of `ltx25_demo_home`."""
    from ltx_pipelines.demo import default_demo_dir, ensure_demo_assets

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
        return ensure_demo_assets(default_demo_dir("ltx-2.5"), family="ltx-2.5")
