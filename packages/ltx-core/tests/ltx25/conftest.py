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


@pytest.fixture(scope="module", params=("split", "diffusers"))
def ltx25_model_source(request: pytest.FixtureRequest, ltx25_files: ModelFiles) -> ModelFiles:
    """The LTX-2.5 files: the split set, or the diffusers folder diffusers' converter wrote from it
    (`interop/diffusers-ltx-2.5/`). A test module names the folder components it builds in
    `DIFFUSERS_COMPONENTS` (keys of `verification_ltx25.json`'s `conversion`); the diffusers case skips, naming
    the reason, where that record says the converter did not carry one."""
    if request.param == "split":
        return ltx25_files
    components = getattr(request.module, "DIFFUSERS_COMPONENTS", None)
    if not components:
        pytest.fail(f"{request.module.__name__} uses ltx25_model_source without DIFFUSERS_COMPONENTS", pytrace=False)
    folder = request.getfixturevalue("golden_ltx25_diffusers")
    folder.require(*components)
    return ModelFiles.from_diffusers(folder.path)
