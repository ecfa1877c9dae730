"""fp8-cast on a tiny random transformer: module selection, storage, memory, LoRA fusion rule."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import LoraSpec
from ltx_core.model.transformer import AV_TRANSFORMER, configure_transformer
from ltx_core.quantization import Fp8CastPolicy, UpcastLinear
from ltx_core.runtime import RuntimeOptions, build_transformer

_QUANTIZED_SUFFIXES = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")


def test_policy_selects_block_projections_and_feed_forwards_only(tiny_config):
    with torch.device("meta"):
        model = configure_transformer(tiny_config)
    names = Fp8CastPolicy().module_names(model)
    # six attentions x (q, k, v, out) + two feed-forwards x two layers, per block
    assert len(names) == model.num_blocks * (6 * 4 + 2 * 2)
    assert all(n.startswith("transformer_blocks.") and n.endswith(_QUANTIZED_SUFFIXES) for n in names)
    assert not any("to_gate_logits" in n for n in names)
    assert "transformer_blocks.0.audio_ff.net.2" in names


def test_fp8_cast_halves_the_quantized_weight_bytes(write_checkpoint):
    path, _ = write_checkpoint()
    bf16 = build_transformer(AV_TRANSFORMER, path, device="cpu", dtype=torch.bfloat16)
    fp8 = build_transformer(AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-cast"), device="cpu")
    for name in fp8.quantized_modules:
        module = fp8.get_submodule(name)
        assert isinstance(module, UpcastLinear)
        assert module.weight.dtype == torch.float8_e4m3fn
        reference = bf16.get_submodule(name)
        assert module.weight.nbytes * 2 == reference.weight.nbytes
        # storage only: the float8 value is the bf16 weight rounded to nearest even
        assert torch.equal(module.weight, reference.weight.to(torch.float8_e4m3fn))
    assert fp8.transformer_blocks[0].attn1.to_gate_logits.weight.dtype == torch.bfloat16


def test_lora_is_fused_before_the_downcast_with_the_bf16_rule(write_checkpoint, write_lora):
    path, config = write_checkpoint()
    quantized_target, plain_target = "transformer_blocks.1.attn1.to_q", "transformer_blocks.1.attn1.to_gate_logits"
    lora = write_lora(config, [quantized_target, plain_target])
    strength = 0.5
    model = build_transformer(
        AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-cast"), device="cpu", dtype=torch.float32,
        loras=[LoraSpec(lora, strength)], lora_fusion="weight-dtype",
    )  # fmt: skip
    from safetensors.torch import load_file

    stored, factors = load_file(str(path)), load_file(str(lora))

    def delta(target: str) -> torch.Tensor:
        b = (factors[f"diffusion_model.{target}.lora_B.weight"] * strength).to(torch.bfloat16).float()
        a = factors[f"diffusion_model.{target}.lora_A.weight"].float()
        return (b @ a).to(torch.bfloat16)

    w = stored[f"model.diffusion_model.{quantized_target}.weight"]
    want = (w.to(torch.float8_e4m3fn).to(torch.bfloat16) + delta(quantized_target)).to(torch.float8_e4m3fn)
    assert torch.equal(model.get_submodule(quantized_target).weight, want)
    w = stored[f"model.diffusion_model.{plain_target}.weight"]
    want_plain = (w + delta(plain_target)).float()
    assert torch.equal(model.get_submodule(plain_target).weight, want_plain)


def test_fp8_cast_forward_upcasts_to_the_activation_dtype(make_inputs, write_checkpoint):
    path, _ = write_checkpoint()
    model = build_transformer(
        AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-cast"), device="cpu", dtype=torch.float32
    )
    video, audio = make_inputs()
    v, a = model(video, audio)
    assert v.dtype == torch.float32 and torch.isfinite(v).all() and torch.isfinite(a).all()


def test_a_lora_for_another_model_is_rejected(write_checkpoint, tmp_path):
    from safetensors.torch import save_file

    from ltx_core.loader import CheckpointError

    path, _ = write_checkpoint()
    foreign = tmp_path / "foreign.safetensors"
    pair = {
        "diffusion_model.nothing.lora_A.weight": torch.ones(1, 2),
        "diffusion_model.nothing.lora_B.weight": torch.ones(2, 1),
    }
    save_file(pair, str(foreign))
    with pytest.raises(CheckpointError, match="matches no weight"):
        build_transformer(AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-cast"), loras=[LoraSpec(foreign)])
