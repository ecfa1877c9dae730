"""The released LTX-2.3 22B key set: every variant built on meta from its config matches it exactly."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER, AV_TRANSFORMER, VIDEO_ONLY_TRANSFORMER

pytestmark = pytest.mark.golden


@pytest.fixture(scope="module")
def manifest(golden_dir, golden_lacks):
    path = golden_dir / "ltx-2.3-22b-keys.json"
    if not path.is_file():
        golden_lacks(path.name)
    return json.loads(path.read_text())


@pytest.mark.parametrize("spec", [AV_TRANSFORMER, VIDEO_ONLY_TRANSFORMER, AUDIO_ONLY_TRANSFORMER], ids=lambda s: s.name)
def test_meta_build_matches_released_keys(manifest, spec):
    with torch.device("meta"):
        model = spec.configurator(manifest["config"])
    want = {}
    for file_key, (shape, _dtype) in manifest["keys"].items():
        module_key = spec.ops.rename(file_key)
        if module_key is not None:
            want[module_key] = tuple(shape)
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert sorted(set(want) - set(got)) == [], "keys the model lacks"
    assert sorted(set(got) - set(want)) == [], "keys the file lacks"
    assert {k: v for k, v in got.items() if want[k] != v} == {}
    if spec is AV_TRANSFORMER:
        transformer_keys = {k for k, c in manifest["key_components"].items() if c == "transformer"}
        assert {k for k in manifest["keys"] if spec.ops.rename(k) is not None} == transformer_keys
