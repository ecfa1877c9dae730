"""Image-to-video on the LTX-2.5 demo files from the CLI: the image is re-compressed at the CRF of the
checkpoint's generation (18 from LTX-2.4 on, where LTX-2.3 takes 33) and the sidecar records the CRF the run
used (a CRF given with the image wins: `tests/cli/test_args.py`)."""

from __future__ import annotations

import json

import pytest

from ltx_pipelines import distilled
from ltx_pipelines.engine.model_versions import default_image_crf

pytestmark = pytest.mark.slow

PROMPT = "A red fox runs through fresh snow at dawn"


@pytest.fixture
def demo_home(monkeypatch, ltx25_demo_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    return ltx25_demo_home


def test_image_crf_defaults_to_the_25_generation_and_is_recorded(demo_home, write_test_image, tmp_path):
    image = write_test_image(tmp_path / "first.png", width=96, height=80)
    base = ["--demo", "--demo-family", "ltx-2.5", "--prompt", PROMPT, "--device", "cpu", "--num-frames", "9"]
    output = tmp_path / "default" / "fox.mp4"
    assert distilled.main([*base, "--output-path", str(output), "--image", str(image), "0", "1.0"]) == 0
    parameters = json.loads(output.with_suffix(".json").read_text())["parameters"]
    assert parameters["model_version"] == "2.5.1"
    (recorded,) = parameters["images"]
    assert recorded["crf"] == 18 == default_image_crf((2, 5, 1)) != default_image_crf((2, 3, 0))
    assert recorded["frame_idx"] == 0 and recorded["strength"] == 1.0
