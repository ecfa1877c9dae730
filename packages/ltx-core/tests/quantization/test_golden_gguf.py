"""GGUF files made from the golden checkpoint by `to-gguf`: every tensor within its format's error of
the source, and the Q8_0 transformer within a stated bound of the checkpoint's own on `fx_transformer`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ltx_core.convert import single_file_to_gguf
from ltx_core.loader import LoraSpec, build_model
from ltx_core.loader.gguf_file import read_gguf_tensors
from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
from ltx_core.model.transformer import AV_TRANSFORMER, Modality
from ltx_core.quantization.gguf import GGUFLinear, GGUFTensor, dequantize
from ltx_core.runtime import RuntimeOptions, build_transformer, release_transformer

pytestmark = pytest.mark.golden

# Q8_0 stores each weight to within half a step of amax/127 of its 32-value block (about 0.6% rms of a
# Gaussian block), against bf16's 0.2%: through the blocks that gives ~1% on the velocities of the
# golden model (measured: 0.95e-2 video, 0.45e-2 audio). The bound leaves room for other fixture sets.
Q8_0_RELATIVE_BOUND = 2e-2
# The cases of `fx_transformer` that run without perturbations (the masked one with its mask).
_UNPERTURBED_CASES = {"full": False, "mid": True}


def _format_error_bound(kind: str, source: torch.Tensor) -> torch.Tensor:
    x = source.float()
    if kind == "Q8_0":
        amax = x.reshape(-1, 32).abs().amax(dim=1, keepdim=True).expand(-1, 32).reshape(x.shape)
        return amax * (0.5 / 127 + 2.0**-11) + 127 * 2.0**-25  # half a step + the f16 scale (subnormal too)
    if kind == "F16":
        return x.abs() * 2.0**-11 + 2.0**-25
    if kind == "BF16":
        return x.abs() * 2.0**-8
    return torch.zeros_like(x)  # stored as in the source: exact


@pytest.fixture(scope="module")
def gguf_files(golden_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("gguf")
    return {q: single_file_to_gguf(golden_checkpoint, out / f"t-{q}.gguf", qtype=q) for q in ("F16", "BF16", "Q8_0")}


@pytest.mark.parametrize("qtype", ["F16", "BF16", "Q8_0"])
def test_every_tensor_dequantizes_within_its_format_error(qtype, gguf_files, golden_checkpoint):
    read = read_gguf_tensors(gguf_files[qtype])
    with safe_open(str(golden_checkpoint), "pt") as f:
        keys = [k for k in f.keys() if k.startswith(TRANSFORMER_PREFIX)]  # noqa: SIM118
        assert sorted(read) == sorted(keys)
        quantized = 0
        for key in keys:
            source, got = f.get_tensor(key), read[key]
            assert tuple(got.shape) == tuple(source.shape), key
            kind = got.qtype.name if isinstance(got, GGUFTensor) else {torch.float16: "F16"}.get(got.dtype, "")
            if kind == "" and got.dtype == torch.bfloat16 and source.dtype != torch.bfloat16:
                kind = "BF16"
            quantized += isinstance(got, GGUFTensor)
            err = (dequantize(got) - source.float()).abs()
            assert torch.all(err <= _format_error_bound(kind, source)), f"{key} ({kind}): max error {err.max()}"
    if qtype == "Q8_0":
        assert quantized > 0, "no tensor of the golden checkpoint was quantized"


def _modality(fx, case: str, stream: str, masked: bool) -> Modality:
    return Modality(
        latent=fx[f"{stream}_latent"],
        timesteps=fx[f"{case}.{stream}_timesteps"],
        sigma=fx[f"{case}.{stream}_sigma"],
        positions=fx[f"{stream}_positions"],
        context=fx[f"{stream}_context"],
        context_mask=fx["context_mask"] if masked else None,
    )


def test_q8_0_transformer_is_within_the_stated_bound_of_the_checkpoint(golden_fixture, golden_checkpoint, gguf_files):
    fx = golden_fixture("fx_transformer")
    cases = [c for c in fx.params["cases"] if c in _UNPERTURBED_CASES and f"{c}.video_sigma" in fx]
    assert cases, f"fx_transformer has none of the cases {sorted(_UNPERTURBED_CASES)}"
    reference = build_model(AV_TRANSFORMER, golden_checkpoint, dtype=torch.float32, device="cpu")
    q8 = build_model(AV_TRANSFORMER, gguf_files["Q8_0"], dtype=torch.float32, device="cpu")
    kept = [m for m in q8.modules() if isinstance(m, GGUFLinear) and isinstance(m.weight, GGUFTensor)]
    assert kept, "the Q8_0 model holds no quantized Linear"
    for case in cases:
        masked = _UNPERTURBED_CASES[case]
        video, audio = (_modality(fx, case, s, masked) for s in ("video", "audio"))
        for stream, want, got in zip(("video", "audio"), reference(video, audio), q8(video, audio)):
            relative = ((got - want).norm() / want.norm()).item()
            assert relative <= Q8_0_RELATIVE_BOUND, f"{case}.{stream}: Q8_0 is {relative:.3e} from the checkpoint"
            assert relative > 0, f"{case}.{stream}: identical outputs, the Q8_0 weights were not used"


def test_q8_0_through_the_pipeline_loader_streams_and_refuses_loras(
    golden_fixture, golden_dir, golden_manifest, gguf_files
):
    """`build_transformer` (what the pipelines call) gives the `build_model` outputs, with the blocks
    resident or streamed from RAM or disk (the quantized blocks packed as stored); a LoRA aimed at a
    quantized weight is refused before any tensor is read."""
    fx = golden_fixture("fx_transformer")
    case = next(c for c in fx.params["cases"] if c in _UNPERTURBED_CASES and f"{c}.video_sigma" in fx)
    video, audio = (_modality(fx, case, s, _UNPERTURBED_CASES[case]) for s in ("video", "audio"))
    path = gguf_files["Q8_0"]
    want = build_model(AV_TRANSFORMER, path, dtype=torch.float32, device="cpu")(video, audio)
    for offload in ("none", "cpu", "disk"):
        model = build_transformer(
            AV_TRANSFORMER, path, RuntimeOptions(offload=offload), device="cpu", dtype=torch.float32
        )
        if offload != "none":
            assert any(isinstance(m, GGUFLinear) for m in model.transformer_blocks.modules())
        for stream, w, g in zip(("video", "audio"), want, model(video, audio)):
            assert torch.equal(g, w), f"offload {offload}: {stream} differs from the resident build"
        release_transformer(model)
    lora = next(iter(golden_manifest["loras"].values()))
    with pytest.raises(ValueError, match=r"a LoRA cannot be fused into '.*': it is stored Q8_0-quantized"):
        build_transformer(
            AV_TRANSFORMER,
            path,
            RuntimeOptions(offload="cpu"),
            device="cpu",
            loras=[LoraSpec(golden_dir / lora["file"], 1.0)],
        )
