"""GGUF weights: per-format dequantization within the format's error, K-quant blocks built from the
format spec read back through a file, quantized Linears, LoRA refusal and the missing-config rule."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGUFWriter
from safetensors.torch import save_file
from torch import nn

from ltx_core.convert import main as convert_main
from ltx_core.loader import LoraSpec, ModelFiles, build_model
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.gguf_file import read_gguf_tensors, write_gguf
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.quantization.gguf import GGUFLinear, GGUFTensor, dequantize, prepare_gguf, quantize, torch_dequantize


def _blocks_of(x: torch.Tensor, size: int) -> torch.Tensor:
    return x.reshape(-1, size)


def test_q8_0_dequantizes_within_half_a_step_of_its_block_scale():
    torch.manual_seed(0)
    x = torch.randn(48, 256) * torch.logspace(-3, 1, 48)[:, None]  # rows of very different magnitudes
    q = quantize(x, "Q8_0")
    assert isinstance(q, GGUFTensor) and q.qtype.name == "Q8_0" and q.shape == x.shape
    assert q.raw.numel() == x.numel() // 32 * 34  # one f16 scale + 32 int8 per block
    err = _blocks_of(dequantize(q) - x, 32).abs().amax(dim=1)
    amax = _blocks_of(x, 32).abs().amax(dim=1)
    # Step d = amax/127 (stored as f16): rounding costs d/2, the f16 scale up to 127 * d * 2^-11, or
    # 127 * 2^-25 where d is an f16 subnormal (below 2^-14).
    assert torch.all(err <= amax * (0.5 / 127 + 2.0**-11) + 127 * 2.0**-25)
    # The torch Q8_0 path agrees with the gguf package's reference dequantizer.
    from gguf import quants

    reference = quants.dequantize(q.raw.numpy(), q.qtype)
    assert np.array_equal(dequantize(q).numpy(), reference)


@pytest.mark.parametrize(
    ("qtype", "dtype", "ulp"), [("F16", torch.float16, 2.0**-11), ("BF16", torch.bfloat16, 2.0**-8)]
)
def test_float_formats_round_to_nearest(qtype, dtype, ulp):
    torch.manual_seed(0)
    x = torch.randn(8, 64)
    q = quantize(x, qtype)
    assert q.dtype == dtype
    assert torch.all((q.float() - x).abs() <= x.abs() * ulp)


def _q4_k_block(d: float, dmin: float, sc: list[int], m: list[int], qs: bytes) -> bytes:
    # Q4_K (ggml spec): f16 d, f16 dmin, 12 bytes of 6-bit sub-block scales/mins, 128 bytes of nibbles.
    scales = bytearray(12)
    for j in range(4):
        scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
        scales[j + 4] = m[j] | ((m[j + 4] >> 4) << 6)
        scales[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4)
    return struct.pack("<ee", d, dmin) + bytes(scales) + qs


def _q4_k_expected(d: float, dmin: float, sc: list[int], m: list[int], qs: bytes) -> list[float]:
    # Value p: 64-value chunk c, sub-block j = 2c (low nibbles) or 2c+1 (high nibbles): d*sc[j]*q - dmin*m[j].
    out = []
    for p in range(256):
        c, r = divmod(p, 64)
        byte = qs[c * 32 + r % 32]
        j, q = (2 * c, byte & 0xF) if r < 32 else (2 * c + 1, byte >> 4)
        out.append(d * sc[j] * q - dmin * m[j])
    return out


def _q5_k_block(d: float, dmin: float, sc: list[int], m: list[int], qh: bytes, qs: bytes) -> bytes:
    # Q5_K: as Q4_K, with 32 bytes of fifth bits between the scales and the nibbles.
    return _q4_k_block(d, dmin, sc, m, b"")[:16] + qh + qs


def _q5_k_expected(d: float, dmin: float, sc: list[int], m: list[int], qh: bytes, qs: bytes) -> list[float]:
    # Value p: as Q4_K, plus 16 times bit j (its sub-block) of qh[p % 32].
    out = []
    for p in range(256):
        c, r = divmod(p, 64)
        byte = qs[c * 32 + r % 32]
        j, q = (2 * c, byte & 0xF) if r < 32 else (2 * c + 1, byte >> 4)
        q |= ((qh[r % 32] >> j) & 1) << 4
        out.append(d * sc[j] * q - dmin * m[j])
    return out


def _q6_k_block(d: float, scales: list[int], ql: bytes, qh: bytes) -> bytes:
    # Q6_K: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 sub-block scales, f16 d.
    return ql + qh + struct.pack("<16b", *scales) + struct.pack("<e", d)


def _q6_k_expected(d: float, scales: list[int], ql: bytes, qh: bytes) -> list[float]:
    out = [0.0] * 256
    for half in range(2):
        for quarter in range(4):
            for ell in range(32):
                lo = ql[half * 64 + ell + 32 * (quarter % 2)]
                low = lo & 0xF if quarter < 2 else lo >> 4
                high = (qh[half * 32 + ell] >> (2 * quarter)) & 3
                q = (low | (high << 4)) - 32
                out[half * 128 + quarter * 32 + ell] = d * scales[half * 8 + ell // 16 + 2 * quarter] * q
    return out


def _write_raw_gguf(path: Path, name: str, qtype: str, raw: bytes, shape: tuple[int, int]) -> None:
    from gguf import GGMLQuantizationType

    writer = GGUFWriter(str(path), "ltxv")
    data = np.frombuffer(raw, dtype=np.uint8).reshape(shape[0], -1)
    writer.add_tensor(name, data, raw_dtype=GGMLQuantizationType[qtype])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("qtype", ["Q4_K", "Q5_K", "Q6_K"])
def test_k_quant_blocks_read_from_a_file_dequantize_to_their_spec_values(tmp_path, qtype):
    """The gguf package cannot write K-quants; blocks built by hand from the format spec, with
    values known by construction, are read back through the file reader (two rows of two blocks)."""
    rng = np.random.default_rng(0)
    raw, want = b"", []
    for _ in range(4):
        if qtype == "Q4_K":
            sc, m = [int(v) for v in rng.integers(0, 64, 8)], [int(v) for v in rng.integers(0, 64, 8)]
            qs = bytes(rng.integers(0, 256, 128, dtype=np.uint8))
            raw += _q4_k_block(0.25, 0.5, sc, m, qs)
            want += _q4_k_expected(0.25, 0.5, sc, m, qs)
        elif qtype == "Q5_K":
            sc, m = [int(v) for v in rng.integers(0, 64, 8)], [int(v) for v in rng.integers(0, 64, 8)]
            qh, qs = bytes(rng.integers(0, 256, 32, dtype=np.uint8)), bytes(rng.integers(0, 256, 128, dtype=np.uint8))
            raw += _q5_k_block(0.25, 0.5, sc, m, qh, qs)
            want += _q5_k_expected(0.25, 0.5, sc, m, qh, qs)
        else:
            scales = [int(v) for v in rng.integers(-128, 128, 16)]
            ql, qh = bytes(rng.integers(0, 256, 128, dtype=np.uint8)), bytes(rng.integers(0, 256, 64, dtype=np.uint8))
            raw += _q6_k_block(0.125, scales, ql, qh)
            want += _q6_k_expected(0.125, scales, ql, qh)
    path = tmp_path / "k.gguf"
    _write_raw_gguf(path, "w.weight", qtype, raw, (2, 512))
    assert read_safetensors_header(path).tensors["w.weight"].shape == (2, 512)
    (weight,) = read_gguf_tensors(path).values()
    assert isinstance(weight, GGUFTensor) and weight.qtype.name == qtype and weight.shape == (2, 512)
    want_values = torch.tensor(want, dtype=torch.float32).reshape(2, 512)
    assert torch.equal(dequantize(weight), want_values)
    assert torch.equal(torch_dequantize(weight), want_values)  # the path CUDA weights take


def test_quantized_linear_keeps_its_blocks_through_loading_and_moves():
    torch.manual_seed(0)
    weight, bias = torch.randn(64, 128), torch.randn(64)
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(128, 64), nn.LayerNorm(64))
    state = {
        "0.weight": quantize(weight, "Q8_0"),
        "0.bias": bias,
        "1.weight": torch.ones(64),
        "1.bias": torch.zeros(64),
    }
    assert prepare_gguf(model, state, torch.float32) == ["0"]
    model.load_state_dict(state, strict=True, assign=True)
    model = model.to("cpu").eval().requires_grad_(False)
    assert isinstance(model[0], GGUFLinear) and isinstance(model[0].weight, GGUFTensor)
    assert model[0].weight.raw.numel() == 64 * 128 // 32 * 34  # held as blocks, not dequantized
    x = torch.randn(3, 128)
    assert torch.allclose(model[0](x), x @ dequantize(state["0.weight"]).T + bias, atol=1e-5)


def _tiny_checkpoint(tmp_path: Path) -> Path:
    from ltx_core.model.transformer import configure_transformer

    tiny = {
        "num_layers": 1,
        "num_attention_heads": 2,
        "attention_head_dim": 16,
        "cross_attention_dim": 32,
        "in_channels": 32,
        "out_channels": 32,
        "audio_num_attention_heads": 2,
        "audio_attention_head_dim": 16,
        "audio_cross_attention_dim": 32,
        "audio_in_channels": 32,
        "audio_out_channels": 32,
    }
    torch.manual_seed(0)
    with torch.device("meta"):
        model = configure_transformer({"transformer": tiny})
    model = model.to_empty(device="cpu")
    state = {
        f"model.diffusion_model.{k}": torch.randn_like(v).to(torch.bfloat16) for k, v in model.state_dict().items()
    }
    path = tmp_path / "tiny.safetensors"
    import json

    save_file(state, str(path), metadata={"config": json.dumps({"transformer": tiny})})
    return path


def test_lora_into_a_quantized_weight_is_refused_by_name(tmp_path):
    checkpoint = _tiny_checkpoint(tmp_path)
    gguf_file = tmp_path / "tiny.gguf"
    assert convert_main(["to-gguf", str(checkpoint), str(gguf_file), "--qtype", "Q8_0"]) == 0
    target = "diffusion_model.transformer_blocks.0.attn1.to_q"
    lora = tmp_path / "lora.safetensors"
    save_file({f"{target}.lora_A.weight": torch.randn(2, 32), f"{target}.lora_B.weight": torch.randn(32, 2)}, str(lora))
    model = build_model(AV_TRANSFORMER, gguf_file, device="cpu")
    assert isinstance(model.transformer_blocks[0].attn1.to_q.weight, GGUFTensor)
    with pytest.raises(
        ValueError, match=r"LoRA cannot be fused into 'transformer_blocks\.0\.attn1\.to_q\.weight'.*Q8_0"
    ):
        build_model(AV_TRANSFORMER, gguf_file, device="cpu", loras=[LoraSpec(lora, 1.0)])
    # The same LoRA on the bf16 file fuses (the refusal is about the quantized storage only).
    build_model(AV_TRANSFORMER, checkpoint, device="cpu", loras=[LoraSpec(lora, 1.0)])


def test_to_gguf_refuses_unwritable_types_and_existing_outputs(tmp_path, capsys):
    checkpoint = _tiny_checkpoint(tmp_path)
    out = tmp_path / "t.gguf"
    assert convert_main(["to-gguf", str(checkpoint), str(out), "--qtype", "Q4_K"]) == 2
    assert "--qtype 'Q4_K' cannot be written; writable: ['F16', 'BF16', 'Q8_0']" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
    out.write_bytes(b"mine")
    assert convert_main(["to-gguf", str(checkpoint), str(out)]) == 2
    assert out.read_bytes() == b"mine"


def test_gguf_without_config_takes_it_from_a_companion_file(tmp_path):
    checkpoint = _tiny_checkpoint(tmp_path)
    bare = tmp_path / "bare.gguf"
    from safetensors import safe_open

    with safe_open(str(checkpoint), "pt") as f:
        write_gguf(bare, {k: f.get_tensor(k) for k in f.keys()}, {}, "Q8_0")  # noqa: SIM118
    with pytest.raises(CheckpointError, match=r"--transformer-path: the GGUF file .* carries no LTX config"):
        ModelFiles.split(transformer=bare)
    files = ModelFiles.split(transformer=bare, video_vae=checkpoint)
    assert files.source("transformer").path == checkpoint
    model = build_model(AV_TRANSFORMER, files, device="cpu")
    assert isinstance(model.transformer_blocks[0].attn1.to_q.weight, GGUFTensor)


def test_bare_diffusion_model_names_read_as_the_released_ones(tmp_path):
    """ComfyUI-GGUF's converter strips `model.diffusion_model.`; such a file builds the same model."""
    from safetensors import safe_open

    from ltx_core.runtime import RuntimeOptions, build_transformer

    checkpoint = _tiny_checkpoint(tmp_path)
    prefixed, bare = tmp_path / "prefixed.gguf", tmp_path / "bare.gguf"
    metadata = read_safetensors_header(checkpoint).metadata
    with safe_open(str(checkpoint), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    write_gguf(prefixed, tensors, metadata, "Q8_0")
    write_gguf(bare, {k.removeprefix("model.diffusion_model."): v for k, v in tensors.items()}, metadata, "Q8_0")
    assert sorted(read_safetensors_header(bare).tensors) == sorted(tensors)
    want = build_model(AV_TRANSFORMER, prefixed, device="cpu").state_dict()
    for got in (
        build_model(AV_TRANSFORMER, bare, device="cpu").state_dict(),
        build_transformer(AV_TRANSFORMER, bare, RuntimeOptions(), device="cpu", dtype=torch.float32).state_dict(),
    ):
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            assert torch.equal(dequantize(got[key]), dequantize(value)), key


def test_fp8_quantization_of_a_gguf_file_is_refused_before_loading(tmp_path):
    from ltx_core.runtime import RuntimeOptions, build_transformer

    gguf_file = tmp_path / "tiny.gguf"
    assert convert_main(["to-gguf", str(_tiny_checkpoint(tmp_path)), str(gguf_file)]) == 0
    with pytest.raises(ValueError, match=r"--quantization fp8-cast cannot re-quantize the GGUF file"):
        build_transformer(AV_TRANSFORMER, gguf_file, RuntimeOptions(quantization="fp8-cast"), device="cpu")
