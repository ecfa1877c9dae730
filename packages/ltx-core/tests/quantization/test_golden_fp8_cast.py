"""Parity with the reference's fp8-cast transformer (`fx_fp8_cast`), through `build_transformer`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx_core.loader import LoraSpec
from ltx_core.model.transformer import AV_TRANSFORMER, Modality, to_denoised
from ltx_core.runtime import RuntimeOptions, build_transformer

pytestmark = pytest.mark.golden


def _inputs(golden_fixture, params: dict) -> tuple[Modality, Modality]:
    source = params["inputs_from"]
    fx = golden_fixture(Path(source["file"]).stem)
    case = source["case"]

    def modality(stream: str) -> Modality:
        return Modality(
            latent=fx[f"{stream}_latent"],
            timesteps=fx[f"{case}.{stream}_timesteps"],
            sigma=fx[f"{case}.{stream}_sigma"],
            positions=fx[f"{stream}_positions"],
            context=fx[f"{stream}_context"],
        )

    return modality("video"), modality("audio")


@pytest.mark.parametrize("run", ["fp8", "fp8_lora"])
def test_fp8_cast_reproduces_reference_outputs_and_module_selection(
    run, golden_fixture, golden_checkpoint, golden_dir, assert_golden_close, golden_lacks
):
    fx = golden_fixture("fx_fp8_cast")
    params = fx.params
    if f"{run}.video_velocity" not in fx:
        golden_lacks(f"fx_fp8_cast: {run}.video_velocity")
    loras = []
    if run == "fp8_lora":
        loras = [LoraSpec(golden_dir / params["lora"]["file"], float(params["lora"]["strength"]))]
    options = RuntimeOptions(quantization=params["policy"]["kind"])
    model = build_transformer(
        AV_TRANSFORMER, golden_checkpoint, options, device="cpu", dtype=torch.float32, loras=loras,
        lora_fusion="weight-dtype",
    )  # fmt: skip
    assert list(model.quantized_modules) == sorted(params[f"{run}.quantized_modules"])
    storage = getattr(torch, params["policy"]["storage_dtype"])
    for name in model.quantized_modules:
        module = model.get_submodule(name)
        assert module.weight.dtype == storage, name
        assert module.bias is None or module.bias.dtype == storage, name
    unquantized = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n not in model.quantized_modules
    ]
    assert all(model.get_submodule(n).weight.dtype == torch.float32 for n in unquantized)

    for name in params.get(f"{run}.stored_weights", []):
        want = fx[f"{run}.weight.{name}"]
        got = model.get_submodule(name).weight.float()
        assert torch.equal(got, want), f"{name}: fused float8 weight differs in {(got != want).sum()} elements"

    video, audio = _inputs(golden_fixture, params)
    v_vel, a_vel = model(video, audio)
    for stream, velocity, modality in (("video", v_vel, video), ("audio", a_vel, audio)):
        assert_golden_close(velocity, fx[f"{run}.{stream}_velocity"], name=f"{run}.{stream}_velocity")
        denoised = to_denoised(modality.latent, velocity, modality.timesteps)
        assert_golden_close(denoised, fx[f"{run}.{stream}_denoised"], name=f"{run}.{stream}_denoised")
