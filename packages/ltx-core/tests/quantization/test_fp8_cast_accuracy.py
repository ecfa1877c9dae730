"""fp8-cast against the bfloat16 model on the golden checkpoint: the accuracy cost of float8 storage.

The bound comes from the number format, not from one set's weights: storing a weight `w` in
float8_e4m3fn changes it by at most half a unit in the last place, `e(w) = max(|w|, smallest normal)
* eps / 2` (eps = 2**-3 for 3 mantissa bits; below the smallest normal the spacing is fixed). The same
model with every quantized weight moved by the full `e(w)` (random sign) is the worst rounding the
format allows per weight; the fp8-cast outputs (each weight moved by at most `e(w)`, about half of it on
average) must stay within that model's distance from bf16, in relative L2 and in max |difference|.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx_core.model.transformer import AV_TRANSFORMER, Modality
from ltx_core.runtime import RuntimeOptions, build_transformer

pytestmark = pytest.mark.golden

FP8 = torch.finfo(torch.float8_e4m3fn)


def _half_ulp(weight: torch.Tensor) -> torch.Tensor:
    """The largest change rounding `weight` to float8_e4m3fn can make, per element."""
    return weight.float().abs().clamp(min=FP8.smallest_normal) * (FP8.eps / 2)


def _moved_by_half_ulp(model: torch.nn.Module, names: list[str]) -> None:
    """Move every weight (and bias) of the modules `names` by its full half ulp, with a random sign."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name in names:
            module = model.get_submodule(name)
            for tensor in (module.weight, module.bias):
                if tensor is None:
                    continue
                sign = torch.randint(0, 2, tensor.shape, generator=generator).float() * 2 - 1
                tensor.copy_((tensor.float() + sign * _half_ulp(tensor)).to(tensor.dtype))


def test_fp8_cast_velocities_stay_within_stated_tolerance_of_bf16(golden_fixture, golden_checkpoint):
    params = golden_fixture("fx_fp8_cast").params["inputs_from"]
    fx = golden_fixture(Path(params["file"]).stem)
    case = params["case"]

    def modality(stream: str) -> Modality:
        return Modality(
            latent=fx[f"{stream}_latent"].bfloat16(),
            timesteps=fx[f"{case}.{stream}_timesteps"].bfloat16(),
            sigma=fx[f"{case}.{stream}_sigma"],
            positions=fx[f"{stream}_positions"],
            context=fx[f"{stream}_context"].bfloat16(),
        )

    video, audio = modality("video"), modality("audio")

    def build(quantization: str | None) -> torch.nn.Module:
        options = RuntimeOptions(quantization=quantization)
        return build_transformer(AV_TRANSFORMER, golden_checkpoint, options, device="cpu", dtype=torch.bfloat16)

    quantized = build("fp8-cast")
    names = list(quantized.quantized_modules)
    assert names, "fp8-cast quantized no module"
    outputs = {"fp8-cast": quantized(video, audio)}
    del quantized
    outputs["bf16"] = build(None)(video, audio)
    worst_case = build(None)
    _moved_by_half_ulp(worst_case, names)
    outputs["half-ulp"] = worst_case(video, audio)
    for i, stream in enumerate(("video", "audio")):
        want, got, bound = (outputs[k][i].float() for k in ("bf16", "fp8-cast", "half-ulp"))
        assert not torch.equal(want, got), f"{stream}: fp8-cast changed nothing (was anything quantized?)"
        rel, rel_bound = (float((x - want).norm() / want.norm()) for x in (got, bound))
        assert rel <= rel_bound, f"{stream}: relative L2 error {rel:.4f} > {rel_bound:.4f} (full half ulps)"
        worst, worst_bound = (float((x - want).abs().max()) for x in (got, bound))
        assert worst <= worst_bound, f"{stream}: max |diff| {worst:.4f} > {worst_bound:.4f} (full half ulps)"
