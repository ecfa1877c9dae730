"""What both demo sets write with: released key names for a module's weights, the stored dtype, seeded
initialisation, and atomic writes of files and folders into the cache."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from ltx_pipelines.io.atomic_files import apply_umask, atomic_output

# Marks a file or folder as still being written: a later build recognises such leftovers and deletes them.
PARTIAL_MARK = ".partial"


def partial_name(path: Path) -> Path:
    """A name beside `path` unique to this writer (leading dot and `PARTIAL_MARK`: a leftover is recognisable)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{PARTIAL_MARK}")


def save_demo_file(tensors: dict[str, torch.Tensor], metadata: dict[str, str], path: Path) -> None:
    """Write `tensors` as the released files store them (floating ones in bfloat16), atomically."""
    with atomic_output(path, overwrite=True) as tmp:
        stored = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
        save_file(stored, str(tmp), metadata=metadata)
        apply_umask(tmp)  # safetensors may recreate the file private


def replace_folder(path: Path, build: Callable[[Path], None]) -> None:
    """Build a folder beside `path` with `build(tmp)` and swap it in whole (no half-built folder at `path`)."""
    tmp = partial_name(path)
    old = path.with_name(tmp.name.replace(PARTIAL_MARK, f".old{PARTIAL_MARK}"))
    try:
        build(tmp)
        apply_umask(tmp)
        # A folder cannot replace a non-empty one in one step: move the old one aside first.
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, old):
            if leftover.exists():
                shutil.rmtree(leftover)


def seeded(seed: int, build: Callable[[torch.Generator], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """`build(generator)` with the global generator seeded too, the caller's random state given back after."""
    # Module initialisers draw from the global generator: seeding it makes files that depend only on the seed.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(torch.Generator().manual_seed(seed))


def file_keys_of(component: str, module: nn.Module) -> dict[str, torch.Tensor]:
    """Map a component's module keys to the released single-file keys (the inverse of our key rules)."""

    def file_key(key: str) -> str:
        if component == "transformer":
            return "model.diffusion_model." + key
        if component == "text_embeddings":
            for ours, theirs in (
                ("video_connector.", "model.diffusion_model.video_embeddings_connector."),
                ("audio_connector.", "model.diffusion_model.audio_embeddings_connector."),
                ("feature_extractor.", "text_embedding_projection."),
            ):
                if key.startswith(ours):
                    return theirs + key[len(ours) :]
            raise ValueError(f"unexpected text-embeddings key {key!r}")
        if component == "vocoder":
            return "vocoder." + key
        vae_prefix, part = {
            "video_encoder": ("vae.", "encoder."),
            "video_decoder": ("vae.", "decoder."),
            "audio_encoder": ("audio_vae.", "encoder."),
            "audio_decoder": ("audio_vae.", "decoder."),
        }[component]
        if key.startswith("per_channel_statistics."):
            return vae_prefix + key
        return vae_prefix + part + key

    return {file_key(k): v for k, v in module.state_dict().items()}


def randomise_latent_statistics(tensors: dict[str, torch.Tensor], generator: torch.Generator) -> None:
    # Freshly initialised statistics may be zeros; the VAEs divide by std-of-means.
    for key, value in tensors.items():
        if key.endswith("per_channel_statistics.std-of-means"):
            tensors[key] = 0.5 + torch.rand(value.shape, generator=generator)
        elif key.endswith("per_channel_statistics.mean-of-means"):
            tensors[key] = 0.1 * torch.randn(value.shape, generator=generator)
