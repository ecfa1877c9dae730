"""The runtime features on a tiny transformer with the LTX-2.5 flags (bias-free FFNs, no prompt AdaLN,
the keyframe embedding fed by a keyframes mask): streaming, fp8-cast, LoRA fusion, memory estimate,
compile. No golden files."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ltx_core.compilation import CompileConfig, compile_blocks, uncompile_blocks
from ltx_core.loader import LoraSpec, ModelFiles
from ltx_core.memory_estimate import transformer_weight_bytes
from ltx_core.model.transformer import AV_TRANSFORMER, configure_transformer
from ltx_core.quantization import UpcastLinear
from ltx_core.runtime import RuntimeOptions, build_transformer, release_transformer

LTX25_FLAGS = {
    "ff_bias": False,
    "audio_ff_bias": False,
    "use_prompt_adaln_single": False,
    "use_keyframes_abs_pos_embedding": True,
    "num_layers": 3,
}


@pytest.fixture
def ltx25_checkpoint(write_checkpoint):
    return write_checkpoint("ltx25.safetensors", **LTX25_FLAGS)


def _marked(make_inputs, count: int = 3):
    video, audio = make_inputs()
    mask = torch.zeros(*video.latent.shape[:2], 1)
    mask[:, :count] = 1.0
    return replace(video, keyframes_mask=mask), audio


def test_keyframe_embedding_moves_only_what_the_mask_marks(make_model, make_inputs):
    model = make_model(**LTX25_FLAGS)
    assert model.keyframes_abs_pos_embedding.shape == (1, 16)
    assert not hasattr(model, "prompt_adaln_single") and model.transformer_blocks[0].ff.net[2].bias is None
    video, audio = make_inputs()
    plain = model(video, audio)
    unmarked = model(replace(video, keyframes_mask=torch.zeros(*video.latent.shape[:2], 1)), audio)
    marked = model(*_marked(make_inputs))
    assert torch.equal(plain[0], unmarked[0])
    assert float((marked[0] - plain[0]).abs().max()) > 1e-3
    # A model without the embedding ignores the mask, as the reference does.
    other = make_model()
    assert torch.equal(other(*_marked(make_inputs))[0], other(video, audio)[0])
    with pytest.raises(ValueError, match="keyframes_mask must be"):
        model(replace(video, keyframes_mask=torch.zeros(1, 2, 1)), audio)


@pytest.mark.parametrize("offload", ["cpu", "disk"])
def test_streaming_from_the_model_files_equals_the_resident_model(ltx25_checkpoint, make_inputs, offload):
    path, _ = ltx25_checkpoint
    files = ModelFiles.split(transformer=path)
    full = build_transformer(AV_TRANSFORMER, files, device="cpu", dtype=torch.float32)
    streamed = build_transformer(
        AV_TRANSFORMER, files, RuntimeOptions(offload=offload, device_slots=1), device="cpu", dtype=torch.float32
    )
    assert not streamed.keyframes_abs_pos_embedding.is_meta
    inputs = _marked(make_inputs)
    for got, want in zip(streamed(*inputs), full(*inputs)):
        assert torch.equal(got, want)
    release_transformer(streamed)


def test_fp8_cast_quantizes_bias_free_projections_and_keeps_the_embedding(ltx25_checkpoint, make_inputs):
    path, _ = ltx25_checkpoint
    model = build_transformer(
        AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-cast"), device="cpu", dtype=torch.float32
    )
    ff = model.get_submodule("transformer_blocks.0.ff.net.2")
    assert isinstance(ff, UpcastLinear) and ff.weight.dtype == torch.float8_e4m3fn and ff.bias is None
    assert model.keyframes_abs_pos_embedding.dtype == torch.float32  # not quantized
    v, a = model(*_marked(make_inputs))
    assert torch.isfinite(v).all() and torch.isfinite(a).all()


def test_lora_fuses_into_the_bias_free_feed_forward(ltx25_checkpoint, write_lora):
    path, config = ltx25_checkpoint
    target = "transformer_blocks.1.ff.net.0.proj"
    lora = write_lora(config, [target])
    base = build_transformer(AV_TRANSFORMER, path, device="cpu", dtype=torch.float32)
    fused = build_transformer(
        AV_TRANSFORMER, path, device="cpu", dtype=torch.float32, loras=[LoraSpec(lora, 0.5)], lora_fusion="float32"
    )
    from safetensors.torch import load_file

    f = load_file(str(lora))
    delta = (
        0.5
        * f[f"diffusion_model.{target}.lora_B.weight"].float()
        @ f[f"diffusion_model.{target}.lora_A.weight"].float()
    )
    got = fused.get_submodule(target).weight - base.get_submodule(target).weight
    assert torch.allclose(got, delta, atol=1e-6, rtol=1e-5)
    assert fused.get_submodule(target).bias is None


def test_memory_estimate_counts_the_2_5_weights(tiny_config):
    tiny_config["transformer"].update(LTX25_FLAGS)
    non_block, block, blocks = transformer_weight_bytes(tiny_config, RuntimeOptions(), torch.bfloat16)
    model = configure_transformer(tiny_config)
    assert non_block + blocks * block == sum(t.numel() * 2 for t in model.state_dict().values())


def test_compiled_blocks_with_keyframes_give_the_eager_outputs(make_model, make_inputs):
    torch._dynamo.reset()
    model = make_model(**{**LTX25_FLAGS, "num_layers": 1})
    inputs = _marked(make_inputs)
    eager = model(*inputs)
    compile_blocks(model.transformer_blocks, CompileConfig(backend="eager"))
    for got, want in zip(model(*inputs), eager):
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-6)
    uncompile_blocks(model.transformer_blocks)
