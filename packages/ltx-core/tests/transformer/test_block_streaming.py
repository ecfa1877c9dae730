"""Block streaming on the CPU (the synchronous path of the same code): identical outputs to a full load."""

from __future__ import annotations

import itertools

import pytest
import torch

from ltx_core.block_streaming import BlockLayout, DiskBlockSource, block_layout
from ltx_core.block_streaming.sources import BlockKeys
from ltx_core.loader import CheckpointError, LoraSpec
from ltx_core.loader.tensor_reader import TensorReader
from ltx_core.loader.tensorwise import WeightConversion
from ltx_core.model.transformer import AV_TRANSFORMER, AV_TRANSFORMER_KEYS, configure_transformer
from ltx_core.runtime import RuntimeOptions, build_transformer, release_transformer

_BLOCKS = 4


@pytest.fixture
def checkpoint(write_checkpoint):
    return write_checkpoint(num_layers=_BLOCKS)


def _run(model, make_inputs, steps: int = 2):
    video, audio = make_inputs()
    return [model(video, audio) for _ in range(steps)]  # the second pass reuses (and refills) the slots


def _assert_identical(got, want):
    for step_got, step_want in zip(got, want):
        for g, w in zip(step_got, step_want):
            assert torch.equal(g, w), f"max |diff| {float((g - w).abs().max()):.3e}"


@pytest.mark.parametrize("offload", ["cpu", "disk"])
@pytest.mark.parametrize("device_slots", [1, 2, 3])
def test_streamed_output_is_identical_to_the_full_model(checkpoint, make_inputs, offload, device_slots):
    path, _ = checkpoint
    full = build_transformer(AV_TRANSFORMER, path, device="cpu", dtype=torch.float32)
    options = RuntimeOptions(offload=offload, device_slots=device_slots)
    streamed = build_transformer(AV_TRANSFORMER, path, options, device="cpu", dtype=torch.float32)
    streamer = streamed.block_streamer
    assert streamer.slots.nbytes == device_slots * streamer.slots.layout.nbytes
    assert all(p.is_meta for p in streamed.transformer_blocks[0].parameters()), "blocks must not be resident"
    assert not any(p.is_meta for n, p in streamed.named_parameters() if not n.startswith("transformer_blocks."))
    _assert_identical(_run(streamed, make_inputs), _run(full, make_inputs))
    release_transformer(streamed)


@pytest.mark.parametrize("host_slots", [1, 2, 3])
def test_disk_source_with_any_number_of_host_slots(checkpoint, make_inputs, host_slots):
    path, _ = checkpoint
    full = build_transformer(AV_TRANSFORMER, path, device="cpu", dtype=torch.bfloat16)
    options = RuntimeOptions(offload="disk", host_slots=host_slots, device_slots=2)
    streamed = build_transformer(AV_TRANSFORMER, path, options, device="cpu", dtype=torch.bfloat16)
    bf16_inputs = lambda: tuple(
        type(m)(**{**m.__dict__, "latent": m.latent.bfloat16(), "context": m.context.bfloat16()}) for m in make_inputs()
    )
    _assert_identical(_run(streamed, bf16_inputs), _run(full, bf16_inputs))
    release_transformer(streamed)


def test_lora_fp8_and_disk_streaming_equal_fusing_then_quantizing_at_load(checkpoint, write_lora, make_inputs):
    path, config = checkpoint
    targets = [
        "transformer_blocks.0.attn1.to_q",
        "transformer_blocks.2.ff.net.2",
        "transformer_blocks.3.audio_attn2.to_v",
        "transformer_blocks.1.video_to_audio_attn.to_gate_logits",  # not quantized: the plain rule
    ]
    loras = [
        LoraSpec(write_lora(config, targets), 0.75),
        LoraSpec(write_lora(config, targets[:2], "b.safetensors", seed=3)),
    ]
    fp8 = RuntimeOptions(quantization="fp8-cast")
    kwargs = {"device": "cpu", "dtype": torch.float32, "loras": loras, "lora_fusion": "weight-dtype"}
    loaded = build_transformer(AV_TRANSFORMER, path, fp8, **kwargs)
    streamed = build_transformer(
        AV_TRANSFORMER, path, RuntimeOptions(quantization="fp8-cast", offload="disk"), **kwargs
    )
    unfused = build_transformer(AV_TRANSFORMER, path, fp8, device="cpu", dtype=torch.float32)
    for target in targets:
        assert not torch.equal(loaded.get_submodule(target).weight, unfused.get_submodule(target).weight), target
    got, want = _run(streamed, make_inputs), _run(loaded, make_inputs)
    _assert_identical(got, want)
    # and the streamed slots hold float8 for the quantized weights
    assert streamed.transformer_blocks[0].attn1.to_q.weight.dtype == torch.float8_e4m3fn
    release_transformer(streamed)


def _disk_source(path, slots, prefetch):
    with torch.device("meta"):
        model = configure_transformer({"transformer": _config_of(path)})
    conversion = WeightConversion(dtype=torch.float32)
    layout = block_layout(model.transformer_blocks, "transformer_blocks.", conversion)
    with TensorReader(path) as reader:
        keys = BlockKeys.scan(reader, AV_TRANSFORMER_KEYS, "transformer_blocks.", layout)
    return layout, DiskBlockSource(path, AV_TRANSFORMER_KEYS, keys, layout, conversion, slots=slots, prefetch=prefetch)


def _config_of(path):
    from ltx_core.loader import read_checkpoint_config

    return read_checkpoint_config(path, "transformer")


def test_disk_source_serves_blocks_in_any_order(checkpoint):
    path, _ = checkpoint
    from safetensors.torch import load_file

    stored = load_file(str(path))
    layout, source = _disk_source(path, slots=2, prefetch=1)
    try:
        for index in (2, 0, 3, 3, 1, 0):
            views = layout.views(source.acquire(index))
            want = stored[f"model.diffusion_model.transformer_blocks.{index}.attn1.to_q.weight"].float()
            assert torch.equal(views["attn1.to_q.weight"], want)
            source.release(index, None)
    finally:
        source.close()


def test_layout_packs_each_tensor_at_an_aligned_offset(tiny_config):
    with torch.device("meta"):
        block = configure_transformer(tiny_config).transformer_blocks[0]
    layout = BlockLayout.of(
        block, lambda name, t: torch.float8_e4m3fn if name.endswith("to_q.weight") else torch.float32
    )
    assert all(p.offset % 64 == 0 for p in layout.places)
    assert layout.place("attn1.to_q.weight").nbytes == block.attn1.to_q.weight.numel()
    ends = sorted((p.offset, p.offset + p.nbytes) for p in layout.places)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(ends)), "views overlap"


def test_a_checkpoint_missing_a_block_weight_is_rejected_before_streaming(write_checkpoint, tmp_path):
    from safetensors.torch import load_file, save_file

    path, config = write_checkpoint(num_layers=2)
    tensors = load_file(str(path))
    del tensors["model.diffusion_model.transformer_blocks.1.ff.net.2.weight"]
    broken = tmp_path / "broken.safetensors"
    import json

    save_file(tensors, str(broken), metadata={"config": json.dumps(config)})
    with pytest.raises(CheckpointError, match="block 1 does not fit"):
        build_transformer(AV_TRANSFORMER, broken, RuntimeOptions(offload="disk"), device="cpu")


@pytest.mark.parametrize("device_slots", [1, 3])
def test_streaming_an_already_loaded_model_keeps_its_outputs(make_model, make_inputs, device_slots):
    from ltx_core.block_streaming import stream_loaded_blocks

    model = make_model(num_layers=_BLOCKS)
    want = _run(model, make_inputs)
    streamer = stream_loaded_blocks(model, torch.device("cpu"), device_slots=device_slots)
    assert all(p.is_meta for p in model.transformer_blocks[1].parameters())
    _assert_identical(_run(model, make_inputs), want)
    streamer.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (copy stream + events path)")
@pytest.mark.parametrize("offload", ["cpu", "disk"])
def test_cuda_streaming_with_copy_stream_matches_the_resident_model(checkpoint, make_inputs, offload):
    path, _ = checkpoint
    full = build_transformer(AV_TRANSFORMER, path, device="cuda", dtype=torch.float32)
    options = RuntimeOptions(offload=offload, device_slots=2)
    streamed = build_transformer(AV_TRANSFORMER, path, options, device="cuda", dtype=torch.float32)

    def cuda_inputs():
        return tuple(
            type(m)(**{k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in m.__dict__.items()})
            for m in make_inputs()
        )

    # Same kernels on the same values; allow float32 rounding in case cuBLAS picks another algorithm for
    # the slot views' alignment.
    for got, want in zip(_run(streamed, cuda_inputs, steps=3), _run(full, cuda_inputs, steps=3)):
        for g, w in zip(got, want):
            assert torch.allclose(g, w, atol=1e-5, rtol=1e-5), f"max |diff| {float((g - w).abs().max()):.3e}"
    release_transformer(streamed)


def _loss_and_grads(model, make_inputs, steps: int = 2):
    """Per step: the loss and the gradients of the inputs and of the non-block weights (the blocks' are frozen)."""
    trained = [p for n, p in model.named_parameters() if not n.startswith("transformer_blocks.")]
    out = []
    for step in range(steps):
        video, audio = make_inputs(seed=step)
        video.latent.requires_grad_(True)
        for p in trained:
            p.grad = None
        v, a = model(video, audio)
        loss = v.square().mean() + a.square().mean()
        loss.backward()
        out.append((loss.detach(), video.latent.grad, *(p.grad for p in trained)))
    return out


@pytest.mark.parametrize("checkpointing", [False, True])
def test_streamed_training_step_has_the_resident_gradients(make_model, make_inputs, checkpointing):
    """Block swap for training: forward and backward read the frozen weights of 4 blocks through 2 slots."""
    from ltx_core.block_streaming import stream_loaded_blocks

    def build():
        model = make_model(num_layers=_BLOCKS).train()
        model.transformer_blocks.requires_grad_(False)
        model.set_gradient_checkpointing(checkpointing)
        return model

    want = _loss_and_grads(build(), make_inputs)
    model = build()
    streamer = stream_loaded_blocks(model, torch.device("cpu"), device_slots=2)
    streamer.for_training(checkpointing=checkpointing)
    copies = []
    acquire = streamer.source.acquire
    streamer.source.acquire = lambda index: copies.append(index) or acquire(index)
    got = _loss_and_grads(model, make_inputs, steps=3)
    for step_got, step_want in zip(got, want):
        for g, w in zip(step_got, step_want):
            assert (g is None) == (w is None)
            assert g is None or torch.equal(g, w), f"max |diff| {float((g - w).abs().max()):.3e}"
    # The forward pass ends with the top blocks resident, where the backward pass starts, and vice versa:
    # after the first step each step copies the 2 swapped blocks twice (upwards, then downwards).
    assert copies == [0, 1, 2, 3, 1, 0] + [2, 3, 1, 0] * 2
    streamer.close()
