"""GGUF Gemma 3 text encoders (`ltx_core.text_encoders.gemma.gguf_gemma`): `to-gguf` writes a Gemma 3 folder
in llama.cpp's gemma3 layout; every tensor reads back within its format's own rounding; the Q8_0 file's
contexts stay within the stated bound; its layers stay quantized, streamed or not; a file described only
by llama.cpp's fields (no config of ours, the tokenizer beside it) builds the same model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ltx_core.convert import gemma_folder_to_gguf_file, main
from ltx_core.loader.state_dict import load_state_dict
from ltx_core.quantization.gguf import GGUFLinear, GGUFTensor
from ltx_core.text_encoders.gemma import GemmaTextEncoder, build_tiny_gemma_folder, encode_text_prompts
from ltx_core.text_encoders.gemma.gguf_gemma import (
    GGUF_Q8_0_CONTEXT_RTOL,
    gemma_folder_to_gguf,
    gguf_gemma_key_rules,
    gguf_name,
)

from .conftest import write_tiny_text_checkpoint

PROMPTS = ["A red fox trots across a snowy field.", "blurry, low quality"]
# Rows of 64 values fill Q8_0 blocks; six layers follow llama.cpp's fixed pattern (every sixth one global).
HIDDEN, LAYERS = 64, 6
LENGTH = 64


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory) -> Path:
    return build_tiny_gemma_folder(tmp_path_factory.mktemp("gemma64"), hidden_size=HIDDEN, num_layers=LAYERS)


@pytest.fixture(scope="module")
def gguf_files(gemma_dir, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("gguf")
    files = {q: gemma_folder_to_gguf_file(gemma_dir, out / f"gemma-{q}.gguf", qtype=q) for q in ("F16", "BF16")}
    # The command line writes the Q8_0 one (exit status 0, the file in place).
    assert main(["to-gguf", str(gemma_dir), str(out / "gemma-Q8_0.gguf"), "--qtype", "Q8_0"]) == 0
    files["Q8_0"] = out / "gemma-Q8_0.gguf"
    return files


def _text_tensors(gemma_dir: Path) -> dict[str, torch.Tensor]:
    tensors = load_file(str(gemma_dir / "model.safetensors"))
    prefix = "language_model.model."
    return {k[len(prefix) :]: v.float() for k, v in tensors.items() if k.startswith(prefix)}


def test_names_are_llama_cpps_gemma3_names(gemma_dir):
    from gguf import MODEL_ARCH, get_tensor_name_map

    names = get_tensor_name_map(MODEL_ARCH.GEMMA3, LAYERS)
    rules = gguf_gemma_key_rules()
    for key in _text_tensors(gemma_dir):
        stem, _, leaf = key.rpartition(".")
        assert gguf_name(key) == f"{names.get_name(f'model.{stem}')}.{leaf}", key
        assert rules.rename(gguf_name(key)) == f"model.{key}"


def _within_format(qtype: str, got: torch.Tensor, want: torch.Tensor) -> bool:
    if qtype == "Q8_0" and want.ndim == 2 and want.shape[-1] % 32 == 0 and want.numel() >= 1024:
        # One scale d = max|x| / 127 per 32 values: each value within half a step, plus the float16
        # rounding of d (relative 2^-11) times at most 127 steps.
        blocks = want.reshape(-1, 32)
        step = blocks.abs().amax(dim=1, keepdim=True) / 127
        return bool(((got.reshape(-1, 32) - blocks).abs() <= step * (0.5 + 127 * 2**-11) + 1e-12).all())
    eps = {"F16": 2**-11, "BF16": 2**-8, "Q8_0": 2**-11}[qtype]  # unquantized tensors keep F16/F32 storage
    if want.ndim == 1:
        eps = 2**-23  # norms are stored in float32 (shifted by one and back)
        return bool(((got - want).abs() <= 2 * eps * (want.abs() + 1)).all())
    return bool(((got - want).abs() <= eps * want.abs() + 6e-8).all())


@pytest.mark.parametrize("qtype", ["F16", "BF16", "Q8_0"])
def test_every_tensor_reads_back_within_its_formats_rounding(gemma_dir, gguf_files, qtype):
    from ltx_core.quantization.gguf import dequantize

    source = _text_tensors(gemma_dir)
    read = load_state_dict(gguf_files[qtype], gguf_gemma_key_rules())
    assert set(read) == {f"model.{k}" for k in source}
    kinds = {type(v).__name__ for v in read.values()}
    assert ("GGUFTensor" in kinds) == (qtype == "Q8_0")
    for key, want in source.items():
        got = dequantize(read[f"model.{key}"], torch.float32)
        assert got.shape == want.shape, key
        assert _within_format(qtype, got, want), f"{key}: max error {(got - want).abs().max():.3g}"


def _contexts(gemma_root: Path, checkpoint: Path, mode: str = "full"):
    encoded = encode_text_prompts(
        PROMPTS, gemma_root=gemma_root, checkpoint=checkpoint, dtype=torch.bfloat16, device="cpu",
        max_length=LENGTH, mode=mode,
    )  # fmt: skip
    return encoded.contexts


def test_q8_0_gemma_contexts_stay_within_the_bound(gemma_dir, gguf_files, tmp_path):
    checkpoint = write_tiny_text_checkpoint(tmp_path, HIDDEN, LAYERS)
    want = _contexts(gemma_dir, checkpoint)
    got = _contexts(gguf_files["Q8_0"], checkpoint)
    for name in ("video", "audio"):
        a, b = getattr(got, name).float(), getattr(want, name).float()
        error = float((a - b).norm() / b.norm())
        print(f"Q8_0 gemma {name} relative error {error:.4f}")
        assert 0 < error < GGUF_Q8_0_CONTEXT_RTOL, f"{name}: relative error {error:.4f}"
    assert torch.equal(got.mask, want.mask)


@pytest.fixture(scope="module")
def q8_0_hidden_states(gguf_files):
    with GemmaTextEncoder.load(gguf_files["Q8_0"], dtype=torch.float32, device="cpu", max_length=LENGTH) as gemma:
        return gemma.encode(PROMPTS).hidden_states


def test_a_loaded_q8_0_gemma_keeps_its_layers_quantized(gguf_files):
    with GemmaTextEncoder.load(gguf_files["Q8_0"], dtype=torch.bfloat16, device="cpu", max_length=LENGTH) as gemma:
        layer = gemma.model.model.layers[0]
        assert isinstance(layer.mlp.down_proj, GGUFLinear) and layer.mlp.down_proj.weight.qtype.name == "Q8_0"
        assert layer.input_layernorm.weight.dtype == torch.bfloat16  # norms: shifted back, in the run dtype


@pytest.mark.parametrize("mode", ["stream-ram", "stream-disk"])
def test_q8_0_gemma_layers_stay_quantized_and_stream_exactly(gguf_files, q8_0_hidden_states, mode):
    path = gguf_files["Q8_0"]
    want = q8_0_hidden_states
    options = {"dtype": torch.float32, "device": "cpu", "max_length": LENGTH}
    with GemmaTextEncoder.load(path, mode=mode, **options) as gemma:
        got = gemma.encode(PROMPTS).hidden_states
        q_proj = gemma.model.model.layers[0].self_attn.q_proj
        assert isinstance(q_proj, GGUFLinear)
        assert isinstance(q_proj.weight, GGUFTensor) and q_proj.weight.qtype.name == "Q8_0"
    assert len(got) == LAYERS + 1
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.slow
def test_a_llama_cpp_file_with_the_tokenizer_beside_it_builds_the_same_model(gemma_dir, gguf_files, tmp_path):
    plain = tmp_path / "llama-cpp" / "gemma-BF16.gguf"
    plain.parent.mkdir()
    gemma_folder_to_gguf(gemma_dir, plain, qtype="BF16", ltx_fields=False)
    options = {"dtype": torch.float32, "device": "cpu", "max_length": LENGTH}
    with pytest.raises(Exception, match="carries no Hugging Face tokenizer and there is no .*tokenizer.json"):
        GemmaTextEncoder.load(plain, **options)
    shutil.copy(gemma_dir / "tokenizer.json", plain.parent / "tokenizer.json")
    with GemmaTextEncoder.load(gguf_files["BF16"], **options) as gemma:
        want, want_ids = gemma.encode(PROMPTS).hidden_states, gemma.tokenizer(PROMPTS).input_ids
    with GemmaTextEncoder.load(plain, **options) as gemma:
        # The config came from llama.cpp's gemma3.* fields and its fixed Gemma 3 rules.
        assert gemma.text_config.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
        got, got_ids = gemma.encode(PROMPTS).hidden_states, gemma.tokenizer(PROMPTS).input_ids
    assert torch.equal(got_ids, want_ids)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def test_fp8_of_a_gguf_gemma_is_refused(gguf_files):
    with pytest.raises(ValueError, match="fp8 cannot re-quantize the GGUF file"):
        GemmaTextEncoder.load(gguf_files["Q8_0"], device="cpu", mode="fp8")


def test_a_gguf_of_another_architecture_is_refused(tmp_path):
    from ltx_core.loader.gguf_file import write_gguf

    path = tmp_path / "transformer.gguf"
    write_gguf(path, {"model.diffusion_model.x.weight": torch.zeros(4, 4)}, {}, "F16")
    with pytest.raises(Exception, match="architecture 'ltxv'; a Gemma text encoder is 'gemma3'"):
        GemmaTextEncoder.load(path, device="cpu")


def test_to_gguf_of_a_bad_folder_names_it_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out.gguf"
    (tmp_path / "not-gemma").mkdir()
    assert main(["to-gguf", str(tmp_path / "not-gemma"), str(out)]) == 2
    assert "not-gemma' has no config.json; expected a Hugging Face Gemma 3 folder" in capsys.readouterr().err
    assert not out.exists()


def _q6_k(x: torch.Tensor) -> GGUFTensor:
    """`x` (rows of a multiple of 256 values) in Q6_K blocks, by a plain round-to-nearest quantizer written
    from the block format (the gguf package cannot make K-quants): 16 sub-blocks of 16 values, each with an
    int8 scale of one float16 super-scale d; value = d * scale * (q - 32), q in 0..63."""
    import numpy as np

    from ltx_core.quantization.gguf import quantized

    n = x.numel() // 256
    sub = x.detach().float().numpy().reshape(n, 2, 4, 2, 16)  # half, quarter, ell // 16, ell % 16
    step = np.abs(sub).max(-1) / 31
    d = (step.max(axis=(1, 2, 3)) / 127).astype(np.float16)
    d32 = np.maximum(d.astype(np.float32), 1e-30)[:, None, None, None]
    scales = np.clip(np.round(step / d32), -128, 127).astype(np.int8)
    unit = d32[..., None] * scales[..., None]
    q = (np.clip(np.round(sub / np.where(unit == 0, 1, unit)), -32, 31).astype(np.int32) + 32).reshape(n, 2, 4, 32)
    low, high = q & 0xF, q >> 4
    ql = (low[:, :, 0:2] | (low[:, :, 2:4] << 4)).astype(np.uint8).reshape(n, 128)
    qh = sum(high[:, :, k] << (2 * k) for k in range(4)).astype(np.uint8).reshape(n, 64)
    raw = np.concatenate([ql, qh, scales.reshape(n, 16).view(np.uint8), d.reshape(n, 1).view(np.uint8)], axis=1)
    return quantized(torch.from_numpy(raw.reshape(*x.shape[:-1], -1).copy()), "Q6_K", tuple(x.shape))


@pytest.mark.slow
def test_a_k_quant_gemma_with_mixed_types_loads_and_streams_exactly(tmp_path):
    """A Q4_K_M-like file: K-quant layer weights whose types differ between layers (layer 0's attn_v and
    ffn_down Q6_K, the rest Q8_0): every weight is kept in its type, and the layers stream exactly."""
    from ltx_core.quantization.gguf import dequantize, quantize

    folder = build_tiny_gemma_folder(tmp_path / "gemma256", hidden_size=256, num_layers=3, num_attention_heads=2)
    source = _text_tensors(folder)
    overrides: dict[str, torch.Tensor] = {}
    for key, value in source.items():
        name = gguf_name(key)
        if value.ndim == 2 and name.startswith("blk."):
            k_quant = name.startswith("blk.0.") and (".attn_v." in name or ".ffn_down." in name)
            overrides[name] = _q6_k(value) if k_quant else quantize(value, "Q8_0")
            error = float((dequantize(overrides[name]) - value).norm() / value.norm())
            assert error < (0.03 if k_quant else 0.01), f"{name}: {error:.4f}"  # ~ step / sqrt(12) / sigma
    path = tmp_path / "gemma-mixed.gguf"
    gemma_folder_to_gguf(folder, path, qtype="F16", overrides=overrides)
    options = {"dtype": torch.float32, "device": "cpu", "max_length": LENGTH}
    with GemmaTextEncoder.from_folder(folder, **options) as gemma:
        reference = gemma.encode(PROMPTS).hidden_states
    with GemmaTextEncoder.load(path, **options) as gemma:
        layers = gemma.model.model.layers
        assert layers[0].self_attn.v_proj.weight.qtype.name == "Q6_K"
        assert layers[1].self_attn.v_proj.weight.qtype.name == "Q8_0"
        want = gemma.encode(PROMPTS).hidden_states
    with GemmaTextEncoder.load(path, mode="stream-disk", **options) as gemma:
        assert len(gemma._streamers) == 2  # layer 0 apart: its tensors are stored in other types
        got = gemma.encode(PROMPTS).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    error = float((torch.stack(want) - torch.stack(reference)).norm() / torch.stack(reference).norm())
    print(f"mixed Q6_K / Q8_0 gemma hidden states relative error {error:.4f}")
    assert error < GGUF_Q8_0_CONTEXT_RTOL
