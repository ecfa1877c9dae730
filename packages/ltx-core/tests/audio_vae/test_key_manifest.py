"""Built on the meta device from the released 22B config, each audio component has exactly the file's keys."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER, BandwidthExtensionVocoder


@pytest.fixture(scope="module")
def manifest(golden_dir, golden_lacks):
    path = golden_dir / "ltx-2.3-22b-keys.json"
    if not path.is_file():
        golden_lacks(path.name)
    return json.loads(path.read_text())


@pytest.mark.golden
@pytest.mark.parametrize("spec", [AUDIO_ENCODER, AUDIO_DECODER, VOCODER], ids=lambda s: s.name)
def test_meta_module_matches_released_keys(manifest, spec):
    want = {}
    for file_key, (shape, _dtype) in manifest["keys"].items():
        module_key = spec.ops.rename(file_key)
        if module_key is not None:
            want[module_key] = tuple(shape)
    assert want, f"no {spec.name} keys in the manifest"
    with torch.device("meta"):
        module = spec.configurator(manifest["config"])
    got = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    assert sorted(set(got) ^ set(want))[:10] == []
    wrong = {k: (got[k], want[k]) for k in got if got[k] != want[k]}
    assert not wrong, f"shape mismatches (module, file): {dict(list(wrong.items())[:10])}"


@pytest.mark.golden
def test_released_vocoder_is_the_48khz_bandwidth_extension(manifest):
    with torch.device("meta"):
        vocoder = VOCODER.configurator(manifest["config"])
    assert isinstance(vocoder, BandwidthExtensionVocoder)
    assert vocoder.input_sample_rate == manifest["config"]["vocoder"]["bwe"]["input_sampling_rate"]
    assert vocoder.output_sample_rate == manifest["config"]["vocoder"]["bwe"]["output_sampling_rate"]
    # 100 mel frames per second at 16 kHz: the first generator must write 160 samples per frame.
    assert vocoder.vocoder.config.hop * 100 == vocoder.input_sample_rate
