"""The LTX-2.5 golden split files as one `ModelFiles` value (the path the pipelines load through)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ltx_core.loader import ModelFiles


@pytest.fixture(scope="session")
def ltx25_files(golden_ltx25_dir: Path, golden_ltx25_manifest: dict[str, Any]) -> ModelFiles:
    names = golden_ltx25_manifest["component_files"]
    return ModelFiles.split(
        **{
            c: golden_ltx25_dir / names[c]
            for c in ("transformer", "text_encoder", "video_vae", "audio_vae", "duration_head")
        }
    )


@pytest.fixture(scope="session")
def ltx25_component_file(golden_ltx25_dir: Path, golden_ltx25_manifest: dict[str, Any]):
    """`ltx25_component_file("spatial_upsampler")` -> the path of a standalone file of the set."""

    def get(name: str) -> Path:
        files = {**golden_ltx25_manifest["component_files"], **golden_ltx25_manifest.get("more_component_files", {})}
        return golden_ltx25_dir / files[name]

    return get


@pytest.fixture(scope="session", params=("split", "diffusers"))
def ltx25_model_source(request: pytest.FixtureRequest, ltx25_files: ModelFiles) -> ModelFiles:
    """The LTX-2.5 files of the components diffusers carries exactly (transformer, video encoder, duration
    head): the split set, or the diffusers folder diffusers' converter wrote from it (`interop/diffusers-ltx-2.5/`)."""
    if request.param == "split":
        return ltx25_files
    interop = request.getfixturevalue("golden_interop_dir")
    return ModelFiles.from_diffusers(interop / "diffusers-ltx-2.5")
