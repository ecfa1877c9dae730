"""Each named rule set selects exactly its component's keys of the released single-file layout."""

import json
from collections import defaultdict

import pytest

from ltx_core.loader import (
    AUDIO_DECODER_KEYS,
    AUDIO_ENCODER_KEYS,
    TEXT_EMBEDDINGS_KEYS,
    TRANSFORMER_KEYS,
    VIDEO_DECODER_KEYS,
    VIDEO_ENCODER_KEYS,
    VOCODER_KEYS,
    read_safetensors_header,
    selected_keys,
)

# Component names used by ltx-2.3-22b-keys.json, and our rule set for each.
RULES = {
    "transformer": TRANSFORMER_KEYS,
    "text_embeddings": TEXT_EMBEDDINGS_KEYS,
    "vae_encoder": VIDEO_ENCODER_KEYS,
    "vae_decoder": VIDEO_DECODER_KEYS,
    "audio_vae_encoder": AUDIO_ENCODER_KEYS,
    "audio_vae_decoder": AUDIO_DECODER_KEYS,
    "vocoder": VOCODER_KEYS,
}
LATENT_STATS = ("per_channel_statistics.std-of-means", "per_channel_statistics.mean-of-means")


def _select(keys, ops):
    return {k for k in keys if ops.rename(k) is not None}


@pytest.mark.golden
def test_rule_sets_partition_the_released_22b_key_list(golden_dir):
    manifest = json.loads((golden_dir / "ltx-2.3-22b-keys.json").read_text())
    by_component = defaultdict(set)
    for key, component in manifest["key_components"].items():
        by_component[component].add(key)
    assert set(by_component) == set(RULES)
    all_keys = set(manifest["keys"])
    for component, ops in RULES.items():
        got = _select(all_keys, ops)
        want = by_component[component]
        # Decoders read the latent statistics that the key list files under the encoders.
        extra = {k for k in got - want if k.endswith(LATENT_STATS)}
        assert got - extra == want, f"{component}: {sorted((got - extra) ^ want)[:10]}"


@pytest.mark.golden
def test_rule_sets_select_the_golden_checkpoint_components(golden_checkpoint):
    keys = set(read_safetensors_header(golden_checkpoint).tensors)
    transformer = _select(keys, TRANSFORMER_KEYS)
    text = _select(keys, TEXT_EMBEDDINGS_KEYS)
    assert transformer and text and not transformer & text
    assert all("embeddings_connector" not in k for k in transformer)
    assert all(k.startswith("model.diffusion_model.") or k.startswith("text_embedding_projection.") for k in text)
    assert _select(keys, VOCODER_KEYS) == {k for k in keys if k.startswith("vocoder.")}

    used = set().union(*(_select(keys, ops) for ops in RULES.values()))
    unused = keys - used
    # Only extra latent statistics (if the set stores any) are left unread.
    assert all(k.startswith("vae.per_channel_statistics.") for k in unused), sorted(unused)[:10]
    assert not any(k.endswith(LATENT_STATS) for k in unused)


@pytest.mark.golden
def test_rule_sets_produce_distinct_module_keys(golden_checkpoint):
    for name, ops in RULES.items():
        mapping = selected_keys(golden_checkpoint, ops)
        assert len(set(mapping.values())) == len(mapping), name
    # The first `vocoder.` goes: a plain vocoder's `vocoder.conv_pre.*` -> `conv_pre.*`, the bandwidth-extension
    # layout's `vocoder.vocoder.*` / `vocoder.bwe_generator.*` -> `vocoder.*` / `bwe_generator.*`.
    vocoder = selected_keys(golden_checkpoint, VOCODER_KEYS)
    assert vocoder and all(v == k[len("vocoder.") :] for k, v in vocoder.items())
    bwe_layout = any(k.startswith("vocoder.bwe_generator.") for k in vocoder)
    conv_pre = "vocoder.vocoder.conv_pre.weight" if bwe_layout else "vocoder.conv_pre.weight"
    assert vocoder[conv_pre] == conv_pre[len("vocoder.") :]
    renamed = selected_keys(golden_checkpoint, VIDEO_DECODER_KEYS)
    assert renamed["vae.per_channel_statistics.std-of-means"] == "per_channel_statistics.std-of-means"
    assert all(not v.startswith(("vae.", "decoder.")) for v in renamed.values())
