"""Activation offload (`acceleration.offload_activations`): the checkpointed block inputs leave the compute
device's tensors and come back for the backward pass, and the gradients stay bit-identical."""

from __future__ import annotations

import weakref

import pytest
import torch

from ltx_core.model.transformer import configure_transformer
from ltx_core.model.transformer.block import AVTransformerBlock
from ltx_core.model.transformer.model import Modality
from ltx_trainer.config import ConfigError, parse_config
from ltx_trainer.training.activation_offload import enable_activation_offload
from ltx_trainer.training.lora_files import add_lora


def _modality(g: torch.Generator, tokens: int, channels: int, axes: int, context: int) -> Modality:
    sigma = torch.tensor([0.7, 0.4])
    positions = torch.arange(tokens, dtype=torch.float32)[None, None, :, None].expand(2, axes, tokens, 2).clone()
    positions[..., 1] += 1
    return Modality(
        latent=torch.randn(2, tokens, channels, generator=g),
        timesteps=sigma[:, None, None].expand(2, tokens, 1).clone(),
        sigma=sigma,
        positions=positions,
        context=torch.randn(2, 5, context, generator=g),
    )


def _model(offload: bool):
    from ltx_pipelines.demo.ltx23 import DEMO_CONFIG

    torch.manual_seed(0)
    model = configure_transformer({"transformer": {**DEMO_CONFIG["transformer"], "num_layers": 3}})
    model.requires_grad_(False)
    model.set_gradient_checkpointing(True)
    enable_activation_offload(model, offload)
    return add_lora(model, 4, 4, 0.0, ["to_q", "to_v", "ff.net.0.proj"]).train()


def _step(model, inputs):
    for p in model.parameters():
        p.grad = None
    video, audio = model(*inputs)
    loss = video.square().mean() + audio.square().mean()
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}


def test_offloaded_block_inputs_leave_the_gradients_unchanged():
    g = torch.Generator().manual_seed(1)
    inputs = (_modality(g, 8, 128, 3, 32), _modality(g, 6, 128, 1, 16))
    plain, offloaded = _model(False), _model(True)
    # Nudge lora_B off zero so every adapter has a gradient path through the blocks.
    for model in (plain, offloaded):
        torch.manual_seed(2)
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.data.normal_(0, 0.1)
    want_loss, want = _step(plain, inputs)
    got_loss, got = _step(offloaded, inputs)
    assert torch.equal(got_loss, want_loss)
    assert want.keys() == got.keys() and want
    for name, grad in want.items():
        assert torch.equal(got[name], grad), name


def test_block_outputs_are_not_kept_by_the_checkpoint():
    """Without offload the checkpoint holds every block's input (the previous block's output) until the
    backward pass; with it only the host copy is held and the block's own output is released."""
    kept = {}
    for offload in (False, True):
        model = _model(offload)
        outputs = []
        hooks = [
            m.register_forward_hook(lambda _m, _a, out, outputs=outputs: outputs.append(weakref.ref(out[0].x)))
            for m in model.modules()
            if isinstance(m, AVTransformerBlock)
        ]
        g = torch.Generator().manual_seed(1)
        video, audio = model(_modality(g, 8, 128, 3, 32), _modality(g, 6, 128, 1, 16))
        # The last block's output feeds the output projection (kept by autograd either way).
        kept[offload] = sum(ref() is not None for ref in outputs[:-1])
        (video.square().mean() + audio.square().mean()).backward()
        for hook in hooks:
            hook.remove()
    assert kept == {False: 2, True: 0}


def test_offload_without_checkpointing_is_refused(checkpoint, data_root, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from training_data import training_config

    raw = training_config(checkpoint, data_root, tmp_path / "out", acceleration={"offload_activations": True})
    with pytest.raises(ConfigError, match="offload_activations.*enable_gradient_checkpointing"):
        parse_config(raw)
