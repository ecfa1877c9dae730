"""The short imports a notebook user reaches for resolve to the real objects, lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ltx_core
import ltx_pipelines


@pytest.mark.parametrize("package", [ltx_core, ltx_pipelines], ids=["ltx_core", "ltx_pipelines"])
def test_every_exported_name_resolves(package):
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        package.Nope  # noqa: B018


def test_short_imports_are_the_defining_objects():
    from ltx_core import VIDEO_DECODER, build_model
    from ltx_core.loader.builder import build_model as defined_build_model
    from ltx_core.model.video_vae import VIDEO_DECODER as defined_decoder
    from ltx_pipelines import DistilledPipeline, demo
    from ltx_pipelines.distilled import DistilledPipeline as defined_pipeline

    assert build_model is defined_build_model and VIDEO_DECODER is defined_decoder
    assert DistilledPipeline is defined_pipeline
    assert callable(demo.ensure_demo_assets)


def test_importing_the_packages_loads_no_pipeline_module():
    code = (
        "import sys, ltx_core, ltx_pipelines; "
        "print(sorted(m for m in sys.modules if m.startswith(('ltx_pipelines.', 'ltx_core.'))"
        " and m != 'ltx_core.lazy_exports'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
