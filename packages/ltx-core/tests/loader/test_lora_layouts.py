"""LoRA layouts: every writer's file reads back to the same factors and fuses identically; layout
detection errors name the offending key; each layout's alpha source is honoured."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.loader import CheckpointError, LoraFusionPrecision, LoraSpec, fuse_loras
from ltx_core.loader.lora_layouts import (
    LoraFactors,
    LoraLayout,
    LoraWeights,
    lora_file_tensors,
    read_lora,
    resolve_kohya_name,
)

# Reference module names that exercise every rename: plain block modules, diffusers-renamed top-level
# modules, cross-modal attention, the text connectors and the text projection.
MODULES = {
    "transformer_blocks.0.attn1.to_k": (6, 8),
    "transformer_blocks.1.audio_to_video_attn.to_out.0": (8, 6),
    "patchify_proj": (8, 5),
    "av_ca_video_scale_shift_adaln_single.linear": (4, 8),
    "video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q": (8, 8),
}


def _weights(alpha: float | None, rank: int = 4, seed: int = 0) -> LoraWeights:
    g = torch.Generator().manual_seed(seed)
    modules = {
        name: LoraFactors(
            down=torch.randn(rank, fan_in, generator=g).to(torch.bfloat16),
            up=torch.randn(fan_out, rank, generator=g).to(torch.bfloat16),
            alpha=alpha,
        )
        for name, (fan_out, fan_in) in MODULES.items()
    }
    return LoraWeights("mem", LoraLayout.COMFYUI, modules, {"note": "kept"})


def _state_dict(seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {f"{n}.weight": torch.randn(o, i, generator=g).to(torch.bfloat16).float() for n, (o, i) in MODULES.items()}


def _write(tmp_path, weights: LoraWeights, layout: LoraLayout, name: str):
    tensors, metadata = lora_file_tensors(weights, layout)
    path = tmp_path / f"{name}.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    return path


@pytest.mark.parametrize("layout", list(LoraLayout))
@pytest.mark.parametrize("alpha", [None, 2.0])
def test_every_layout_written_and_read_back_fuses_identically(tmp_path, layout, alpha):
    weights = _weights(alpha)
    path = _write(tmp_path, weights, layout, layout.value)
    read = read_lora(path)
    assert read.layout is layout
    assert set(read.modules) == set(MODULES)
    source = _write(tmp_path, weights, LoraLayout.COMFYUI, "source")
    sd = _state_dict()
    for precision in LoraFusionPrecision:
        want = fuse_loras(
            sd, [LoraSpec(source, 0.75)], precision=precision, stored_dtypes=dict.fromkeys(sd, torch.bfloat16)
        )
        got = fuse_loras(
            sd, [LoraSpec(path, 0.75)], precision=precision, stored_dtypes=dict.fromkeys(sd, torch.bfloat16)
        )
        for key in sd:
            assert torch.equal(got[key], want[key]), (layout, precision, key)


def test_diffusers_and_kohya_key_names(tmp_path):
    weights = _weights(2.0)
    diffusers, meta = lora_file_tensors(weights, LoraLayout.DIFFUSERS)
    assert "transformer.proj_in.lora_A.weight" in diffusers
    assert "transformer.av_cross_attn_video_scale_shift.linear.lora_B.weight" in diffusers
    assert "connectors.video_connector.transformer_blocks.0.attn1.to_q.lora_A.weight" in diffusers
    config = json.loads(meta["lora_adapter_metadata"])
    assert config["transformer.lora_alpha"] == 2.0 and config["transformer.r"] == 4
    assert "proj_in" in config["transformer.target_modules"]
    kohya, kmeta = lora_file_tensors(weights, LoraLayout.KOHYA)
    assert "lora_unet_transformer_blocks_1_audio_to_video_attn_to_out_0.lora_up.weight" in kohya
    assert float(kohya["lora_unet_patchify_proj.alpha"]) == 2.0
    assert kmeta["ss_network_dim"] == "4"


def test_unrecognised_key_is_named_with_the_accepted_layouts(tmp_path):
    path = tmp_path / "odd.safetensors"
    save_file({"blocks.0.q.lora_A.weight": torch.zeros(2, 2), "blocks.0.q.delta": torch.zeros(2, 2)}, str(path))
    with pytest.raises(CheckpointError, match=r"'blocks\.0\.q\.delta'.*diffusers.*kohya"):
        read_lora(path)


def test_mixed_layouts_name_the_first_key_that_differs(tmp_path):
    path = tmp_path / "mixed.safetensors"
    save_file(
        {
            "diffusion_model.a.lora_A.weight": torch.zeros(2, 3),
            "diffusion_model.a.lora_B.weight": torch.zeros(3, 2),
            "lora_unet_b.lora_down.weight": torch.zeros(2, 3),
        },
        str(path),
    )
    with pytest.raises(CheckpointError, match=r"'lora_unet_b\.lora_down\.weight'.*comfyui"):
        read_lora(path)


def test_missing_up_factor_is_named(tmp_path):
    path = tmp_path / "half.safetensors"
    save_file({"diffusion_model.a.lora_A.weight": torch.zeros(2, 3)}, str(path))
    with pytest.raises(CheckpointError, match=r"'diffusion_model\.a' has no up"):
        read_lora(path)


def test_peft_default_keys_take_alpha_from_adapter_config(tmp_path):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 8, generator=g), torch.randn(6, 4, generator=g)
    save_file(
        {
            "base_model.model.transformer_blocks.0.attn1.to_k.lora_A.default.weight": a,
            "base_model.model.transformer_blocks.0.attn1.to_k.lora_B.default.weight": b,
            "base_model.model.transformer_blocks.0.attn1.to_q.lora_A.default.weight": a.clone(),
            "base_model.model.transformer_blocks.0.attn1.to_q.lora_B.default.weight": b.clone(),
        },
        str(tmp_path / "adapter_model.safetensors"),
    )
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8, "alpha_pattern": {"to_q": 1}}))
    read = read_lora(tmp_path / "adapter_model.safetensors")
    assert read.layout is LoraLayout.PEFT
    assert read.modules["transformer_blocks.0.attn1.to_k"].scale == 2.0
    assert read.modules["transformer_blocks.0.attn1.to_q"].scale == 0.25
    assert torch.equal(read.modules["transformer_blocks.0.attn1.to_k"].down, a)


def test_diffusers_without_metadata_has_no_alpha_and_dora_is_refused(tmp_path):
    tensors, _ = lora_file_tensors(_weights(None), LoraLayout.DIFFUSERS)
    path = tmp_path / "plain.safetensors"
    save_file(tensors, str(path))
    assert all(f.scale == 1.0 for f in read_lora(path).modules.values())
    dora = tmp_path / "dora.safetensors"
    meta = {"lora_adapter_metadata": json.dumps({"transformer.lora_alpha": 4, "transformer.use_dora": True})}
    save_file(tensors, str(dora), metadata=meta)
    with pytest.raises(CheckpointError, match="DoRA"):
        read_lora(dora)


def test_kohya_names_resolve_against_module_names_first():
    # A name outside the LTX segment table resolves only with the model's names.
    assert resolve_kohya_name("head_proj_out", ["head_proj.out", "x"]) == "head_proj.out"
    assert resolve_kohya_name("transformer_blocks_12_video_to_audio_attn_to_gate_logits") == (
        "transformer_blocks.12.video_to_audio_attn.to_gate_logits"
    )
    assert resolve_kohya_name("audio_adaln_single_emb_timestep_embedder_linear_1") == (
        "audio_adaln_single.emb.timestep_embedder.linear_1"
    )


def test_kohya_file_fuses_into_a_model_with_unlisted_names(tmp_path):
    """Fusion hands the component's weight keys to the reader, so kohya names of any model resolve."""
    g = torch.Generator().manual_seed(0)
    path = tmp_path / "k.safetensors"
    down, up = torch.randn(2, 4, generator=g), torch.randn(3, 2, generator=g)
    save_file(
        {"lora_unet_my_head.lora_down.weight": down, "lora_unet_my_head.lora_up.weight": up,
         "lora_unet_my_head.alpha": torch.tensor(1.0)},
        str(path),
    )  # fmt: skip
    sd = {"my_head.weight": torch.zeros(3, 4)}
    fused = fuse_loras(sd, [LoraSpec(path, 1.0)], precision="float32")
    torch.testing.assert_close(fused["my_head.weight"], 0.5 * up @ down)
