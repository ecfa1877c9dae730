"""The fp8-cast base for LoRA training (`acceleration.quantization: fp8-cast`) against the bf16 base, on the
reference's training forwards (`fx_training_step`).

The block Linears' weights are stored as float8 e4m3 (3 mantissa bits: each weight is rounded to within
2^-4 of itself, relative) and computed in bf16. The bound: every mode's loss within 2^-4 (relative) of
the bf16 base's loss on the same inputs, i.e. no more than the rounding of a single weight; the bf16
base itself matches the reference (test_golden_training_step.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from ltx_core.loader import build_model
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.types import SpatioTemporalScaleFactors
from ltx_trainer.config import FlexibleStrategyConfig
from ltx_trainer.training.block_swap import build_frozen_base
from ltx_trainer.training.draws import ReplayDraws
from ltx_trainer.training.flexible import FlexibleStrategy, strategy_loss
from ltx_trainer.training.text_contexts import text_connectors_spec
from ltx_trainer.training.timesteps import make_sampler

sys.path.insert(0, str(Path(__file__).parent))
from test_golden_training_step import _batch, _reference_scale

pytestmark = pytest.mark.golden

FP8_LOSS_RTOL = 2.0**-4  # e4m3's relative rounding of one weight


def test_fp8_cast_base_loss_is_within_the_bound_of_the_bf16_base(golden_fixture, golden_checkpoint):
    fx = golden_fixture("fx_training_step")
    p = fx.params
    bf16 = build_model(AV_TRANSFORMER, golden_checkpoint, dtype=torch.bfloat16, device="cpu")
    fp8 = build_frozen_base(
        AV_TRANSFORMER, golden_checkpoint, device=torch.device("cpu"), dtype=torch.bfloat16, blocks_to_swap=0,
        swap_source="ram", quantization="fp8-cast", checkpointing=False,
    )  # fmt: skip
    stored = {p.dtype for n, p in fp8.named_parameters() if n.startswith("transformer_blocks.") and ".to_q." in n}
    assert stored == {torch.float8_e4m3fn}
    connectors = build_model(text_connectors_spec(), golden_checkpoint, dtype=torch.float32, device="cpu")
    with torch.no_grad():
        contexts = connectors(
            fx["batch.video_prompt_embeds"], fx["batch.audio_prompt_embeds"], fx["batch.prompt_attention_mask"]
        )
    scale = SpatioTemporalScaleFactors(**p["video_scale_factors"])
    sampler = make_sampler(p["flow_matching"]["timestep_sampling_mode"], p["flow_matching"]["timestep_sampling_params"])
    report = []
    for mode in p["modes"]:
        config = FlexibleStrategyConfig.model_validate(p[f"{mode}.training_strategy"])
        strategy = FlexibleStrategy(config, sampler, scale, _reference_scale(p[f"{mode}.reference_scale_factors"]))
        order = [name for name, _, _ in p[f"{mode}.draw_order"]]
        losses = {}
        for name, model in (("bf16", bf16), ("fp8", fp8)):
            draws = ReplayDraws({n: fx[f"{mode}.draw.{n}"] for n in order}, order)
            inputs = strategy.prepare(_batch(fx, mode, config), contexts, draws)
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                video, audio = model(
                    inputs.video.modality if inputs.video else None, inputs.audio.modality if inputs.audio else None
                )
            losses[name] = float(strategy_loss(inputs, video, audio).float().mean())
        deviation = abs(losses["fp8"] - losses["bf16"]) / abs(losses["bf16"])
        report.append(f"{mode}: bf16 {losses['bf16']:.5f} fp8 {losses['fp8']:.5f} ({deviation:.2%})")
        assert deviation <= FP8_LOSS_RTOL, "; ".join(report)
    print("\n".join(report))
