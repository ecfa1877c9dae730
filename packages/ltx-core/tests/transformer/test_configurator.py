"""Configurator validation and variant building (tiny random models, no golden files)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_core.loader import CheckpointError, build_model, read_safetensors_header
from ltx_core.model.transformer import (
    AUDIO_ONLY_TRANSFORMER,
    AV_TRANSFORMER,
    VIDEO_ONLY_TRANSFORMER,
    ModelVariant,
    configure_transformer,
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("activation_fn", "gelu"),
        ("qk_norm", "layer_norm"),
        ("norm_elementwise_affine", True),
        ("positional_embedding_type", "sinusoidal"),
        ("use_middle_indices_grid", False),
        ("rope_type", "spiral"),
        ("frequencies_precision", "float16"),
        ("num_layers", 0),
        ("apply_gated_attention", "yes"),
        ("caption_proj_before_connector", False),
        ("text_encoder_norm_type", "layer"),
        ("cross_attention_dim", 12),
    ],
)
def test_rejects_bad_values_naming_the_field(tiny_config, field, value):
    tiny_config["transformer"][field] = value
    with pytest.raises(ValueError, match=field) as info:
        configure_transformer(tiny_config)
    assert repr(value) in str(info.value)


def test_partial_v2_text_path_is_rejected(tiny_config):
    del tiny_config["transformer"]["caption_proj_input_norm"]
    with pytest.raises(ValueError, match="caption_proj_input_norm"):
        configure_transformer(tiny_config)


def test_missing_section_is_reported():
    with pytest.raises(ValueError, match="transformer"):
        configure_transformer({"vae": {}})


def test_ltx2_text_path_adds_caption_projections(tiny_config, make_inputs):
    t = tiny_config["transformer"]
    for k in (
        "caption_proj_before_connector",
        "caption_proj_input_norm",
        "caption_projection_first_linear",
        "caption_projection_second_linear",
    ):
        del t[k]
    t["caption_channels"] = 24
    keys = configure_transformer(tiny_config).state_dict()
    assert keys["caption_projection.linear_1.weight"].shape == (16, 24)
    assert keys["caption_projection.linear_2.weight"].shape == (16, 16)
    assert keys["audio_caption_projection.linear_1.weight"].shape == (8, 24)
    # Contexts arrive caption_channels wide and are projected inside the model.
    model = configure_transformer(tiny_config).eval()
    video, audio = make_inputs(batch=1)
    with pytest.raises(ValueError, match="context must be"):
        model(video, audio)
    wide_v = replace(video, context=torch.randn(1, 5, 24))
    wide_a = replace(audio, context=torch.randn(1, 5, 24))
    with torch.no_grad():
        v_out, a_out = model(wide_v, wide_a)
    assert v_out.shape == video.latent.shape and a_out.shape == audio.latent.shape


def test_flags_change_the_module_layout(tiny_config):
    t = tiny_config["transformer"]
    t.update(apply_gated_attention=False, cross_attention_adaln=False)
    keys = configure_transformer(tiny_config).state_dict()
    assert not any("to_gate_logits" in k or "prompt" in k for k in keys)
    assert keys["transformer_blocks.0.scale_shift_table"].shape == (6, 16)
    assert keys["adaln_single.linear.weight"].shape == (6 * 16, 16)


def test_variants_never_allocate_the_other_stream(tiny_config):
    av = set(configure_transformer(tiny_config, ModelVariant.AUDIO_VIDEO).state_dict())
    video = set(configure_transformer(tiny_config, ModelVariant.VIDEO_ONLY).state_dict())
    audio = set(configure_transformer(tiny_config, ModelVariant.AUDIO_ONLY).state_dict())
    assert video < av and audio < av and not video & audio
    assert not any("audio" in k for k in video)
    coupling = av - video - audio
    assert coupling and all("a2v" in k or "av_ca" in k or "to_audio" in k or "to_video" in k for k in coupling)


def test_variant_rejects_the_absent_stream(make_model, make_inputs):
    video, audio = make_inputs(batch=1)
    with pytest.raises(ValueError, match="no audio stream"):
        make_model(ModelVariant.VIDEO_ONLY)(video, audio)
    with pytest.raises(ValueError, match="no video stream"):
        make_model(ModelVariant.AUDIO_ONLY)(video, audio)
    with pytest.raises(ValueError, match="at least one"):
        make_model()(None, None)


def _write_transformer_checkpoint(path, model, config) -> None:
    """A single-file checkpoint holding `model` under the released transformer prefix, with its config."""
    tensors = {"model.diffusion_model." + k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(path), metadata={"config": json.dumps(config)})


def test_audio_only_model_builds_from_audio_keys_alone(make_model, tiny_config, tmp_path):
    """A file holding only the audio-stream keys suffices for the audio-only model, not for the others."""
    checkpoint = tmp_path / "checkpoint.safetensors"
    _write_transformer_checkpoint(checkpoint, make_model(), tiny_config)
    header = read_safetensors_header(checkpoint)
    wanted = [k for k in header.tensors if AUDIO_ONLY_TRANSFORMER.ops.rename(k) is not None]
    with safe_open(str(checkpoint), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in wanted}
    path = tmp_path / "audio_only.safetensors"
    save_file(tensors, str(path), metadata={"config": json.dumps(header.metadata["config"])})

    full = build_model(AUDIO_ONLY_TRANSFORMER, checkpoint, dtype=torch.float32, device="cpu")
    alone = build_model(AUDIO_ONLY_TRANSFORMER, path, dtype=torch.float32, device="cpu")
    assert not any(k.startswith(("attn1", "patchify_proj")) or ".attn1." in k for k in alone.state_dict())
    for key, value in full.state_dict().items():
        assert torch.equal(alone.state_dict()[key], value), key
    for spec in (AV_TRANSFORMER, VIDEO_ONLY_TRANSFORMER):
        with pytest.raises(CheckpointError, match="missing keys|holds no"):
            build_model(spec, path, dtype=torch.float32, device="cpu")
