"""Parity with the reference text embeddings stage (`fx_text_embeddings`), and the 22B key manifest."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.loader import build_model, checkpoint_config
from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec

pytestmark = pytest.mark.golden


def _gemma_sizes(text_config: dict) -> tuple[int, int]:
    # hidden states = embedding output + one per decoder layer
    return text_config["hidden_size"], text_config["num_hidden_layers"] + 1


def test_matches_reference(golden_dir, golden_manifest, golden_model_source, golden_fixture, assert_golden_close):
    fx = golden_fixture("fx_text_embeddings")
    gemma_config = golden_dir / golden_manifest["gemma_config"]["file"]
    hidden, states = _gemma_sizes(json.loads(gemma_config.read_text())["text_config"])
    assert (hidden, states) == (fx.params["gemma_hidden_size"], fx.params["gemma_num_hidden_states"])
    processor_spec = text_embeddings_spec(hidden, states)
    processor = build_model(processor_spec, golden_model_source, dtype=torch.float32, device="cpu")
    hidden_states = list(fx["hidden_states"].unbind(0))
    mask = fx["attention_mask"]

    features = dict(zip(("video_features", "audio_features"), processor.extract_features(hidden_states, mask)))
    # Both are stored on the LTX-2.3 path; the LTX-2 path feeds one set of features to both modalities.
    stored = [name for name in features if name in fx]
    assert stored, "fixture stores no feature-extractor output"
    if checkpoint_config(processor_spec, golden_model_source)["transformer"].get("caption_proj_before_connector"):
        assert stored == list(features), "the LTX-2.3 text path has per-modality features"
    for name in stored:
        assert_golden_close(features[name], fx[name], name=name)

    contexts = processor(hidden_states, mask)
    assert_golden_close(contexts.video, fx["video_encoding"], name="video_encoding")
    assert_golden_close(contexts.audio, fx["audio_encoding"], name="audio_encoding")
    assert contexts.mask.dtype == torch.int64
    assert torch.equal(contexts.mask, fx["output_attention_mask"])


def test_meta_build_matches_released_keys(golden_dir, golden_lacks):
    path = golden_dir / "ltx-2.3-22b-keys.json"
    if not path.is_file():
        golden_lacks(path.name)
    manifest = json.loads(path.read_text())
    spec = text_embeddings_spec(*_gemma_sizes(manifest["gemma_text_config"]))
    with torch.device("meta"):
        processor = spec.configurator(manifest["config"])
    want = {}
    for file_key, (shape, _dtype) in manifest["keys"].items():
        module_key = spec.ops.rename(file_key)
        if module_key is not None:
            want[module_key] = tuple(shape)
    got = {k: tuple(v.shape) for k, v in processor.state_dict().items()}
    assert sorted(set(want) - set(got)) == [], "keys the model lacks"
    assert sorted(set(got) - set(want)) == [], "keys the file lacks"
    assert {k: v for k, v in got.items() if want[k] != v} == {}
    text_keys = {k for k, c in manifest["key_components"].items() if c == "text_embeddings"}
    assert {k for k in manifest["keys"] if spec.ops.rename(k) is not None} == text_keys
