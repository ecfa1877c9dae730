"""The text-encoder modes (`ltx_core.text_encoders.gemma.modes`): streamed Gemma layers give exactly the
contexts of the full load, from RAM and from disk, for Gemma 3 folders (one file or shards) and packed
Gemma 4 files (layers of two shapes); fp8 layer weights stay within the stated bound of bf16."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx_core.text_encoders.gemma import GemmaTextEncoder, build_tiny_packed_gemma4, encode_text_prompts
from ltx_core.text_encoders.gemma.modes import FP8_CONTEXT_RTOL, TEXT_ENCODER_MODES

from .conftest import SHORT_LENGTH

PROMPTS = ["A red fox trots across a snowy field.", "blurry, low quality"]
STREAMED = ("stream-ram", "stream-disk")


def _contexts(gemma_root: Path, checkpoint: Path, mode: str, short_length: int) -> torch.Tensor:
    encoded = encode_text_prompts(
        PROMPTS, gemma_root=gemma_root, checkpoint=checkpoint, dtype=torch.bfloat16, device="cpu",
        max_length=short_length, mode=mode,
    )  # fmt: skip
    return encoded.contexts


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


@pytest.fixture(scope="module")
def full_contexts(tiny_gemma_dir, tiny_text_checkpoint):
    return _contexts(tiny_gemma_dir, tiny_text_checkpoint, "full", SHORT_LENGTH)


@pytest.mark.parametrize("mode", STREAMED)
def test_streamed_gemma3_gives_the_full_contexts_exactly(
    tiny_gemma_dir, tiny_text_checkpoint, short_length, full_contexts, mode
):
    got = _contexts(tiny_gemma_dir, tiny_text_checkpoint, mode, short_length)
    assert torch.equal(got.video, full_contexts.video)
    assert torch.equal(got.audio, full_contexts.audio)
    assert torch.equal(got.mask, full_contexts.mask)


@pytest.mark.parametrize("mode", STREAMED)
def test_streamed_gemma_keeps_its_layers_off_the_module(tiny_gemma_dir, short_length, mode):
    with GemmaTextEncoder.from_folder(
        tiny_gemma_dir, dtype=torch.float32, device="cpu", max_length=short_length, mode=mode
    ) as gemma:
        layers = gemma.model.model.language_model.layers
        # Loaded: the decoder layers hold no weights of their own; the embeddings are resident.
        assert {p.device.type for p in layers.parameters()} == {"meta"}
        assert gemma.model.model.language_model.embed_tokens.weight.device.type == "cpu"
        gemma.encode(PROMPTS)
        # After a forward every layer weight is a view of one of the streamer's device slots.
        slots = {s.buffer.untyped_storage().data_ptr() for st in gemma._streamers for s in st.slots._slots}
        assert len(slots) == 2 < len(layers)
        assert {p.untyped_storage().data_ptr() for p in layers.parameters()} <= slots


def test_sharded_gemma_folder_streams_from_disk_exactly(tiny_gemma_dir, tmp_path, short_length):
    from transformers import AutoTokenizer, Gemma3ForConditionalGeneration

    sharded = tmp_path / "sharded"
    model = Gemma3ForConditionalGeneration.from_pretrained(tiny_gemma_dir, dtype=torch.float32)
    model.save_pretrained(sharded, max_shard_size="20KB")
    AutoTokenizer.from_pretrained(tiny_gemma_dir).save_pretrained(sharded)
    assert len(list(sharded.glob("model-*.safetensors"))) > 1
    with GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu", max_length=short_length) as g:
        want = g.encode(PROMPTS).hidden_states
    with GemmaTextEncoder.from_folder(
        sharded, dtype=torch.float32, device="cpu", max_length=short_length, mode="stream-disk"
    ) as gemma:
        got = gemma.encode(PROMPTS).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("mode", STREAMED)
def test_streamed_packed_gemma4_gives_the_full_hidden_states_exactly(tmp_path, short_length, mode):
    # Three layers: two sliding-attention ones and a full-attention one of another shape (two groups).
    path = build_tiny_packed_gemma4(tmp_path / "gemma4.safetensors", num_layers=3)
    options = {"dtype": torch.bfloat16, "device": "cpu", "max_length": short_length}
    with GemmaTextEncoder.load(path, **options) as gemma:
        want = gemma.encode(PROMPTS).hidden_states
    with GemmaTextEncoder.load(path, mode=mode, **options) as gemma:
        assert len(gemma._streamers) == 2
        got = gemma.encode(PROMPTS).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def test_fp8_gemma_stores_its_layer_linears_in_float8(tiny_gemma_dir, short_length):
    with GemmaTextEncoder.from_folder(
        tiny_gemma_dir, dtype=torch.bfloat16, device="cpu", max_length=short_length, mode="fp8"
    ) as gemma:
        layer = gemma.model.model.language_model.layers[0]
        assert layer.self_attn.q_proj.weight.dtype == torch.float8_e4m3fn
        assert layer.mlp.down_proj.weight.dtype == torch.float8_e4m3fn
        assert layer.input_layernorm.weight.dtype == torch.bfloat16
        assert gemma.model.model.language_model.embed_tokens.weight.dtype == torch.bfloat16


def test_fp8_gemma3_contexts_stay_within_the_bound(tiny_gemma_dir, tiny_text_checkpoint, short_length, full_contexts):
    got = _contexts(tiny_gemma_dir, tiny_text_checkpoint, "fp8", short_length)
    for name in ("video", "audio"):
        error = relative_error(getattr(got, name), getattr(full_contexts, name))
        print(f"fp8 gemma3 {name} relative error {error:.4f}")
        assert 0 < error < FP8_CONTEXT_RTOL, f"{name}: relative error {error:.4f}"


def test_unknown_text_encoder_mode_is_refused(tiny_gemma_dir):
    with pytest.raises(ValueError, match=r"mode 'gpu' is not supported; accepted: " + ", ".join(TEXT_ENCODER_MODES)):
        GemmaTextEncoder.from_folder(tiny_gemma_dir, mode="gpu")
