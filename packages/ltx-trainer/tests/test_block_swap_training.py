"""Block swap, the fp8-cast base and activation offload in LoRA training, on the CPU.

Swapping blocks moves where the frozen weights are, never their values: the losses and the trained
LoRA weights equal the unswapped run's bit for bit, with and without gradient checkpointing, from host
memory or from the checkpoint file. Offloading the checkpointed block inputs leaves the gradients as
they were.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from ltx_trainer.config import parse_config
from ltx_trainer.training.lora_files import adapter_state
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config

BLOCKS = 4


def _train(checkpoint, data_root, out, steps=2, **acceleration):
    checkpointing = acceleration.pop("gradient_checkpointing", False)
    overrides = {
        "acceleration": {"mixed_precision_mode": "no", **acceleration},
        "optimization": {"learning_rate": 1e-2, "steps": steps, "batch_size": 2, "scheduler_type": "constant"},
    }
    overrides["optimization"]["enable_gradient_checkpointing"] = checkpointing
    config = parse_config(training_config(checkpoint, data_root, out, **overrides))
    trainer = Trainer(config, disable_progress_bars=True)
    history = trainer.train().history
    return trainer, [r.loss for r in history], adapter_state(trainer.parts.unwrapped)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """The demo checkpoint with 4 blocks: swapping 2 leaves 2 device slots, so blocks are prefetched."""
    from ltx_pipelines.demo.ltx23 import DEMO_CONFIG, write_demo_checkpoint

    config = {**DEMO_CONFIG, "transformer": {**DEMO_CONFIG["transformer"], "num_layers": BLOCKS}}
    path = tmp_path_factory.mktemp("four-blocks") / "tiny-ltx.safetensors"
    write_demo_checkpoint(path, config=config)
    return path


@pytest.fixture(scope="module")
def unswapped(checkpoint, data_root, tmp_path_factory):
    runs = {}
    for checkpointing in (False, True):
        out = tmp_path_factory.mktemp("plain") / "out"
        runs[checkpointing] = _train(checkpoint, data_root, out, gradient_checkpointing=checkpointing)[1:]
    return runs


@pytest.mark.slow
@pytest.mark.parametrize(("source", "checkpointing"), [("ram", False), ("disk", True)])
def test_swapped_run_is_bit_identical_to_the_unswapped_run(checkpoint, data_root, tmp_path, unswapped, source,
                                                           checkpointing):  # fmt: skip
    trainer, losses, weights = _train(
        checkpoint, data_root, tmp_path / "out", blocks_to_swap=2, block_swap_source=source,
        gradient_checkpointing=checkpointing,
    )  # fmt: skip
    streamer = trainer.parts.unwrapped.base_model.model.block_streamer
    blocks = len(streamer.blocks)
    assert blocks == BLOCKS and streamer.slots.count == 2, "two blocks swapped: two resident"
    want_losses, want_weights = unswapped[checkpointing]
    assert losses == want_losses
    assert weights.keys() == want_weights.keys()
    for key, value in weights.items():
        assert torch.equal(value, want_weights[key]), key
    # Only the adapters train, and they stay on the device beside the swapped base.
    assert all(".lora_" in n for n, p in trainer.parts.unwrapped.named_parameters() if p.requires_grad)


@pytest.mark.slow
def test_fp8_cast_base_with_swap_trains_adapters_initialised_as_over_the_bf16_base(checkpoint, data_root, tmp_path):
    """float8 block weights and swapped (meta) blocks: peft would place the adapters in float8 / on the meta
    device; they must start as over the plain base (same draws, float32) and train."""
    plain = Trainer(
        parse_config(training_config(checkpoint, data_root, tmp_path / "plain")), disable_progress_bars=True
    )
    raw = training_config(
        checkpoint, data_root, tmp_path / "fp8", acceleration={"quantization": "fp8-cast", "blocks_to_swap": 2}
    )
    fp8 = Trainer(parse_config(raw), disable_progress_bars=True)
    model = fp8.parts.unwrapped
    layout = model.base_model.model.block_streamer.slots.layout
    assert layout.place("attn1.to_q.weight").dtype == torch.float8_e4m3fn  # what the slots hold and copy
    start, want = adapter_state(model), adapter_state(plain.parts.unwrapped)
    assert start.keys() == want.keys()
    for key, value in start.items():
        assert value.dtype == torch.float32 and torch.equal(value, want[key]), key
    history = fp8.train().history
    assert all(torch.isfinite(torch.tensor(r.loss)) for r in history)
    assert any(t.abs().max() > 0 for k, t in adapter_state(model).items() if "lora_B" in k)
