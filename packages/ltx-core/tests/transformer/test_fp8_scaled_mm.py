"""fp8-scaled-mm: selection from a float8 checkpoint, loading of the scales, and the GPU matmul."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ltx_core.loader.tensorwise import WeightConversion, load_tensorwise
from ltx_core.model.transformer import AV_TRANSFORMER, AV_TRANSFORMER_KEYS, configure_transformer
from ltx_core.quantization import Fp8ScaledMMPolicy, ScaledMMLinear, dequantized_linear
from ltx_core.quantization.fp8_cast import Fp8CastPolicy

needs_fp8_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)),
    reason="needs a CUDA GPU with native float8 matmuls (compute capability >= 8.9)",
)


@pytest.fixture
def fp8_checkpoint(write_checkpoint, tmp_path):
    """The tiny checkpoint with its fp8-cast modules stored as F8_E4M3 + per-tensor scales."""
    path, config = write_checkpoint()
    tensors = load_file(str(path))
    with torch.device("meta"):
        names = Fp8CastPolicy().module_names(configure_transformer(config))
    for name in names:
        key = f"model.diffusion_model.{name}"
        weight = tensors[f"{key}.weight"].float()
        scale = weight.abs().max() / torch.finfo(torch.float8_e4m3fn).max
        tensors[f"{key}.weight"] = (weight / scale).to(torch.float8_e4m3fn)
        tensors[f"{key}.weight_scale"] = scale.reshape(())
        tensors[f"{key}.input_scale"] = torch.tensor(0.05)
    out = tmp_path / "tiny_fp8.safetensors"
    save_file(tensors, str(out), metadata={"config": json.dumps(config)})
    return out, config, names


def _load(path, config):
    from ltx_core.loader import read_safetensors_header

    with torch.device("meta"):
        model = configure_transformer(config)
    header = read_safetensors_header(path)
    infos = {m: i for k, i in header.tensors.items() if (m := AV_TRANSFORMER_KEYS.rename(k)) is not None}
    policy = Fp8ScaledMMPolicy()
    names = policy.prepare(model, infos)
    conversion = WeightConversion(dtype=torch.float32, storage_dtypes=policy.storage_dtypes(names))
    model.load_state_dict(
        load_tensorwise(path, AV_TRANSFORMER_KEYS, conversion, device=torch.device("cpu")), assign=True
    )
    return model, names


def test_policy_swaps_exactly_the_scaled_float8_linears(fp8_checkpoint):
    path, config, expected = fp8_checkpoint
    model, names = _load(path, config)
    assert names == expected
    module = model.get_submodule(names[0])
    assert isinstance(module, ScaledMMLinear)
    assert module.weight.dtype == torch.float8_e4m3fn and module.weight_scale.dtype == torch.float32
    assert float(module.input_scale) == pytest.approx(0.05)


def test_a_bf16_checkpoint_is_refused_naming_fp8_cast(write_checkpoint):
    path, config = write_checkpoint()
    with pytest.raises(ValueError, match="needs a float8 checkpoint.*fp8-cast"):
        _load(path, config)


def test_dequantized_reference_matches_the_float_product(fp8_checkpoint):
    path, config, _ = fp8_checkpoint
    model, names = _load(path, config)
    module = model.get_submodule(names[0])
    x = torch.randn(2, 5, module.in_features) * 0.5
    weight = module.weight.float() * module.weight_scale
    xq = (x / 0.05).clamp(-448, 448).to(torch.float8_e4m3fn).float() * 0.05
    want = torch.nn.functional.linear(xq, weight, module.bias.float())
    assert torch.allclose(dequantized_linear(module, x), want, atol=1e-5, rtol=1e-5)


def test_scaled_mm_forward_refuses_the_cpu(fp8_checkpoint):
    path, config, _ = fp8_checkpoint
    model, names = _load(path, config)
    with pytest.raises(ValueError, match="fp8-scaled-mm needs a CUDA GPU"):
        model.get_submodule(names[0])(torch.randn(1, 3, model.get_submodule(names[0]).in_features))


@pytest.mark.gpu
@needs_fp8_gpu
def test_scaled_mm_on_the_gpu_matches_the_dequantized_reference(fp8_checkpoint):
    from ltx_core.runtime import RuntimeOptions, build_transformer

    path, _, names = fp8_checkpoint
    model = build_transformer(
        AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-scaled-mm"), device="cuda", dtype=torch.bfloat16
    )
    for name in names[:4]:
        module = model.get_submodule(name)
        x = torch.randn(16, module.in_features, device="cuda", dtype=torch.bfloat16)
        got, want = module(x).float(), dequantized_linear(module, x).float()
        assert torch.allclose(got, want, atol=2e-2, rtol=2e-2), name
