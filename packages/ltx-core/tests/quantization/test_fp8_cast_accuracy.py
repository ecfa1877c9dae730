"""fp8-cast against the bfloat16 model on the golden checkpoint: the accuracy cost of float8 storage.

Stated tolerance: relative L2 error of each velocity <= 5%, and max |difference| <= 5% of the bf16
output's max |value| (measured: 2.9% / 3.5% for video, 2.7% / 3.3% for audio).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx_core.model.transformer import AV_TRANSFORMER, Modality
from ltx_core.runtime import RuntimeOptions, build_transformer

pytestmark = pytest.mark.golden

REL_L2_BOUND = 0.05
MAX_ABS_FRACTION = 0.05


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
    outputs = {}
    for quantization in (None, "fp8-cast"):
        model = build_transformer(
            AV_TRANSFORMER, golden_checkpoint, RuntimeOptions(quantization=quantization), device="cpu",
            dtype=torch.bfloat16,
        )  # fmt: skip
        outputs[quantization] = model(video, audio)
    for stream, want, got in zip(("video", "audio"), outputs[None], outputs["fp8-cast"]):
        want, got = want.float(), got.float()
        assert not torch.equal(want, got), f"{stream}: fp8-cast changed nothing (was anything quantized?)"
        rel = float((got - want).norm() / want.norm())
        assert rel <= REL_L2_BOUND, f"{stream}: relative L2 error {rel:.3f} > {REL_L2_BOUND}"
        worst = float((got - want).abs().max())
        assert worst <= MAX_ABS_FRACTION * float(want.abs().max()), f"{stream}: max |diff| {worst:.3f}"
