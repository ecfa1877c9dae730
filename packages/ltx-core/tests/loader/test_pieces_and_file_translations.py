"""Layouts that store one module tensor in pieces (diffusers' split q/k/v), and components spread over
files whose key names overlap (each file with its own key translation)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import CheckpointError, ComponentSource, SDOps, load_state_dict
from ltx_core.loader.model_files import Component
from ltx_core.loader.state_dict import load_files, piece_key, stored_float_dtypes, whole_key


def test_pieces_are_joined_in_index_order(write_safetensors):
    q, k, v = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    path = write_safetensors("split.safetensors", {"to_k": k, "to_v": v, "to_q": q, "out": torch.ones(1)})
    ops = (
        SDOps("pieces")
        .keeping()
        .renaming_keys({n: piece_key("qkv", i, 3) for i, n in enumerate(("to_q", "to_k", "to_v"))})
    )
    state_dict = load_state_dict(path, ops)
    assert sorted(state_dict) == ["out", "qkv"]
    assert torch.equal(state_dict["qkv"], torch.cat([q, k, v]))
    assert stored_float_dtypes(path, ops) == {"qkv": torch.float32, "out": torch.float32}
    assert whole_key(piece_key("a.b", 1, 3)) == "a.b" and whole_key("a.b") == "a.b"


def test_a_missing_piece_is_named(write_safetensors):
    path = write_safetensors("partial.safetensors", {"to_q": torch.zeros(2, 3), "to_v": torch.zeros(2, 3)})
    ops = SDOps("pieces").keeping().renaming_keys({"to_q": piece_key("qkv", 0, 3), "to_v": piece_key("qkv", 2, 3)})
    with pytest.raises(CheckpointError, match=r"'qkv' is stored in 3 pieces, the files hold pieces \[0, 2\]"):
        load_state_dict(path, ops)


def test_each_file_takes_its_own_translation(write_safetensors):
    """Two files both hold `stats`: one file's copy is set aside by its own translation, so the component
    reads it once (a shared key table could not tell the two apart)."""
    encoder = write_safetensors("enc.safetensors", {"w": torch.ones(2), "stats": torch.zeros(2)})
    decoder = write_safetensors("dec.safetensors", {"w": torch.full((2,), 2.0), "stats": torch.ones(2)})
    source = ComponentSource(
        Component.VIDEO_VAE,
        (encoder, decoder),
        file_translations=(
            (encoder, SDOps("enc").keeping().renaming_keys({"w": "encoder.w", "stats": "unused.stats"})),
            (decoder, SDOps("dec").keeping().renaming_keys({"w": "decoder.w"})),
        ),
    )
    component_ops = SDOps("component").keeping(prefix="encoder.").keeping(prefix="decoder.").keeping(prefix="stats")
    state_dict = load_files(source.reads(component_ops))
    assert sorted(state_dict) == ["decoder.w", "encoder.w", "stats"]
    assert torch.equal(state_dict["stats"], torch.ones(2))
    with pytest.raises(ValueError, match="translates files it does not read"):
        ComponentSource(Component.VIDEO_VAE, (encoder,), file_translations=((decoder, SDOps("x")),))
