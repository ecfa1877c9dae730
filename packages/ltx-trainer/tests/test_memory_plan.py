"""The training memory plan: its activation estimate against autograd's saved tensors, and its advice."""

from __future__ import annotations

import pytest
import torch

from ltx_core.model.transformer import configure_transformer
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.demo import DEMO_CONFIG
from ltx_trainer.config import FlexibleStrategyConfig, ModalityConfig
from ltx_trainer.training.draws import PerSampleDraws
from ltx_trainer.training.flexible import FlexibleStrategy
from ltx_trainer.training.lora_files import add_lora
from ltx_trainer.training.memory_estimate import (
    TrainingMemoryError,
    TrainingSettings,
    TrainingShape,
    check_training_fits,
    estimate_training_memory,
)
from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler


def _config(blocks: int) -> dict:
    return {**DEMO_CONFIG, "transformer": {**DEMO_CONFIG["transformer"], "num_layers": blocks}}


def _saved_bytes(config: dict, frames: int, size: int, audio_steps: int, text: int) -> int:
    """Bytes autograd keeps for the backward pass of one LoRA forward (float32), each storage once."""
    torch.manual_seed(0)
    model = add_lora(
        configure_transformer(config).requires_grad_(False), 8, 8, 0.0, ["to_q", "to_k", "to_v", "to_out.0"]
    )
    model.train()
    strategy = FlexibleStrategy(
        FlexibleStrategyConfig(video=ModalityConfig(latents_dir="v"), audio=ModalityConfig(latents_dir="a")),
        ShiftedLogitNormalSampler(),
    )
    tr = config["transformer"]
    batch = {
        "v": {"latents": torch.randn(1, 128, frames, size, size), "fps": torch.full((1,), 24.0)},
        "a": {"latents": torch.randn(1, 8, audio_steps, 16)},
    }
    contexts = TextContexts(
        video=torch.randn(1, text, tr["cross_attention_dim"]),
        audio=torch.randn(1, text, tr["audio_cross_attention_dim"]),
        mask=torch.ones(1, text, dtype=torch.int64),
    )
    inputs = strategy.prepare(batch, contexts, PerSampleDraws(0, 0, [0]))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}  # storage -> bytes: a tensor several ops save is held once

    def pack(x: torch.Tensor):
        storage = x.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        model(inputs.video.modality, inputs.audio.modality)
    return sum(saved.values())


@pytest.mark.parametrize(("blocks", "frames", "audio_steps"), [(2, 4, 32), (4, 4, 32), (2, 8, 64)])
def test_activation_estimate_within_15_percent_of_saved_tensors(blocks, frames, audio_steps):
    config = _config(blocks)
    measured = _saved_bytes(config, frames, 8, audio_steps, text=128)
    settings = TrainingSettings(lora_rank=8, mixed_precision="no")
    shape = TrainingShape(video_tokens=frames * 64, audio_tokens=audio_steps, text_tokens=128)
    estimate = estimate_training_memory(config, settings, shape, device="cpu")
    assert abs(estimate.activations / measured - 1) < 0.15, (estimate.activations, measured)


def test_weights_and_adapters_are_counted_from_the_model():
    config = _config(2)
    model = configure_transformer(config)
    full = sum(t.numel() for t in model.state_dict().values())
    fp32 = estimate_training_memory(config, TrainingSettings(lora_rank=4, mixed_precision="no"), TrainingShape(64))
    bf16 = estimate_training_memory(config, TrainingSettings(lora_rank=4), TrainingShape(64))
    assert fp32.base_weights == 4 * full and bf16.base_weights == 2 * full
    lora = add_lora(model.requires_grad_(False), 4, 4, 0.0, ["to_q", "to_k", "to_v", "to_out.0"])
    adapters = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    assert fp32.trainable == adapters * (4 + 4 + 8)  # weights, gradients, two AdamW moments
    eight_bit = estimate_training_memory(
        config, TrainingSettings(lora_rank=4, optimizer="adamw8bit"), TrainingShape(64)
    )
    assert eight_bit.trainable == adapters * (4 + 4 + 2)
    int8 = estimate_training_memory(
        config, TrainingSettings(lora_rank=4, quantization="int8-quanto"), TrainingShape(64)
    )
    assert int8.base_weights < bf16.base_weights


def test_connectors_count_at_the_start_unless_the_contexts_outgrow_the_cache():
    from ltx_trainer.training.context_cache import DEFAULT_BUDGET_BYTES, contexts_bytes_per_sample
    from ltx_trainer.training.text_contexts import text_connectors_spec

    config = _config(2)
    settings = TrainingSettings(lora_rank=4, mixed_precision="no")
    with torch.device("meta"):
        connectors = text_connectors_spec(True).configurator(config)
    connector_bytes = 4 * sum(p.numel() for p in connectors.parameters())
    tr = configure_transformer(config).config
    per_sample = contexts_bytes_per_sample(128, tr.video.dim, tr.audio.dim, 4)
    fits = DEFAULT_BUDGET_BYTES // per_sample
    for device in ("cpu", "cuda"):
        small = estimate_training_memory(config, settings, TrainingShape(256, 32, 128, samples=fits), device)
        large = estimate_training_memory(config, settings, TrainingShape(256, 32, 128, samples=fits + 1), device)
        assert small.connectors == large.connectors == connector_bytes
        assert small.connectors_released and not large.connectors_released
        # released: the loop holds no connectors; the start holds them beside the weights, without gradients
        assert small.step == small.base_weights + small.trainable + small.activations + small.runtime
        assert small.start == small.base_weights + small.trainable_weights + connector_bytes + small.runtime
        assert small.peak == max(small.start, small.step)
        assert large.step == small.step + connector_bytes + (large.runtime - small.runtime)
        assert small.trainable_weights * 4 == small.trainable  # float32 adapters, gradients, two moments
    assert "released before step 1" in small.describe() and "(kept)" in large.describe()


def test_a_run_that_does_not_fit_names_the_settings_that_would():
    config = _config(4)
    settings = TrainingSettings(lora_rank=8)
    shape = TrainingShape(video_tokens=20000, audio_tokens=500, text_tokens=128)
    plain = estimate_training_memory(config, settings, shape)
    checkpointed = estimate_training_memory(config, TrainingSettings(lora_rank=8, gradient_checkpointing=True), shape)
    assert checkpointed.peak < plain.peak
    free = (checkpointed.peak + plain.peak) // 2
    with pytest.raises(TrainingMemoryError, match="enable_gradient_checkpointing: true") as err:
        check_training_fits(config, settings, shape, free, headroom=0.0)
    assert "GiB" in str(err.value)
    assert check_training_fits(config, settings, shape, plain.peak, headroom=0.0) == plain
    with pytest.raises(TrainingMemoryError, match="nothing tried fits"):
        check_training_fits(config, settings, shape, 1000, headroom=0.0)


def test_trainer_start_stops_a_run_that_cannot_fit_unless_told_to_skip(
    checkpoint, data_root, tmp_path, monkeypatch, caplog
):
    from training_data import training_config

    from ltx_trainer.config import parse_config
    from ltx_trainer.training import memory_estimate

    monkeypatch.setattr(memory_estimate, "free_memory", lambda device: 64 * 2**20)  # 64 MiB "free"
    raw = training_config(checkpoint, data_root, tmp_path / "out")
    with pytest.raises(TrainingMemoryError, match="GiB of RAM is free"):
        memory_estimate.check_run(parse_config(raw), torch.device("cpu"))
    raw["acceleration"]["skip_memory_check"] = True
    with caplog.at_level("WARNING", logger="ltx_trainer.training.memory_estimate"):
        estimate = memory_estimate.check_run(parse_config(raw), torch.device("cpu"))
    assert estimate is not None and estimate.peak > 64 * 2**20
    assert "skip_memory_check" in caplog.text


# -- block swap, fp8-cast, activation offload --------------------------------------------------------------


def _block_bytes(config: dict, element_size: int) -> int:
    with torch.device("meta"):
        model = configure_transformer(config)
    return element_size * sum(t.numel() for t in model.transformer_blocks[0].state_dict().values())


def test_swapped_blocks_leave_the_device_for_the_host():
    config = _config(6)
    shape = TrainingShape(video_tokens=2000, audio_tokens=100, text_tokens=128)
    block = _block_bytes(config, 2)  # bf16 base under bf16 LoRA
    plain = estimate_training_memory(config, TrainingSettings(lora_rank=8), shape)
    for source, host_blocks in (("ram", 6), ("disk", 2)):
        swapped = estimate_training_memory(
            config, TrainingSettings(lora_rank=8, blocks_to_swap=4, swap_source=source), shape
        )
        assert plain.base_weights - swapped.base_weights == 4 * block
        assert swapped.host == host_blocks * block and plain.host == 0
        assert swapped.activations == plain.activations
        # On the CPU the host is the device: the RAM source holds every block beside the 2 device slots.
        cpu_plain = estimate_training_memory(config, TrainingSettings(lora_rank=8), shape, "cpu")
        cpu = estimate_training_memory(
            config, TrainingSettings(lora_rank=8, blocks_to_swap=4, swap_source=source), shape, "cpu"
        )
        assert cpu.base_weights - cpu_plain.base_weights == (host_blocks - 4) * block and cpu.host == 0
    with pytest.raises(ValueError, match="blocks_to_swap: 6 must be between 0 and 5"):
        estimate_training_memory(config, TrainingSettings(lora_rank=8, blocks_to_swap=6), shape)


def test_fp8_cast_and_activation_offload_are_counted():
    config = _config(4)
    shape = TrainingShape(video_tokens=2000, audio_tokens=100, text_tokens=128)
    ckpt = TrainingSettings(lora_rank=8, gradient_checkpointing=True)
    base = estimate_training_memory(config, ckpt, shape)
    fp8 = estimate_training_memory(config, TrainingSettings(lora_rank=8, gradient_checkpointing=True,
                                                             quantization="fp8-cast"), shape)  # fmt: skip
    with torch.device("meta"):
        model = configure_transformer(config)
    from ltx_core.quantization import Fp8CastPolicy

    selected = sum(t.numel() for n in Fp8CastPolicy().module_names(model) for t in model.get_submodule(n).parameters())
    assert base.base_weights - fp8.base_weights == selected  # 2 bytes -> 1 per value
    # One block's upcast weights are live while it is recomputed.
    assert fp8.activations - base.activations == selected // len(model.transformer_blocks) * 2
    offload = estimate_training_memory(
        config, TrainingSettings(lora_rank=8, gradient_checkpointing=True, offload_activations=True), shape
    )
    inputs = 2000 * model.config.video.dim * 4 + 100 * model.config.audio.dim * 4
    assert base.activations - offload.activations == (4 - 2) * inputs
    assert offload.host == 4 * inputs


def test_a_run_that_does_not_fit_names_the_fewest_swapped_blocks_that_would():
    from ltx_trainer.training.memory_estimate import resolve_blocks_to_swap

    config = _config(8)
    shape = TrainingShape(video_tokens=4000, audio_tokens=100, text_tokens=128)
    ready = TrainingSettings(lora_rank=8, gradient_checkpointing=True, offload_activations=True)
    peaks = [
        estimate_training_memory(config, TrainingSettings(**{**ready.__dict__, "blocks_to_swap": n}), shape).peak
        for n in range(8)
    ]
    assert peaks == sorted(peaks, reverse=True) and peaks[0] > peaks[-1]
    free = peaks[5]  # 5 blocks swapped just fit; 4 do not
    assert resolve_blocks_to_swap(config, ready, shape, free, headroom=0.0) == 5
    fp8_4 = estimate_training_memory(
        config, TrainingSettings(**{**ready.__dict__, "blocks_to_swap": 4, "quantization": "fp8-cast"}), shape
    )
    with pytest.raises(TrainingMemoryError) as err:
        check_training_fits(config, ready, shape, free, headroom=0.0)
    # fp8-cast with 4 swapped blocks comes before the bf16 base with 5 (fewer swapped blocks), when it fits.
    want = "acceleration.quantization: fp8-cast, acceleration.blocks_to_swap: 4" if fp8_4.peak <= free else (
        "acceleration.blocks_to_swap: 5")  # fmt: skip
    assert f"this would fit: {want} (" in str(err.value)
    # Without checkpointing the first rung is checkpointing alone, then offload, then the swaps.
    plain = TrainingSettings(lora_rank=8)
    with pytest.raises(TrainingMemoryError, match="enable_gradient_checkpointing: true, acceleration.offload"):
        check_training_fits(config, plain, shape, free, headroom=0.0)


def test_trainer_start_resolves_auto_to_the_count_the_plan_picks(checkpoint, data_root, tmp_path, monkeypatch):
    from training_data import training_config

    from ltx_trainer.config import parse_config
    from ltx_trainer.training import memory_estimate as memory_plan

    raw = training_config(checkpoint, data_root, tmp_path / "out", acceleration={"blocks_to_swap": "auto"})
    config = parse_config(raw)
    checkpoint_config, shape = memory_plan._run_inputs(config)
    settings = memory_plan.settings_of(config)
    peaks = [
        estimate_training_memory(checkpoint_config, TrainingSettings(**{**settings.__dict__, "blocks_to_swap": n}),
                                 shape, "cpu").peak
        for n in range(2)
    ]  # fmt: skip
    # The demo transformer on the CPU, RAM source: swapping adds host copies, so 0 is the fewest that fits.
    monkeypatch.setattr(memory_plan, "free_memory", lambda device: int(max(peaks) / 0.95) + 1)
    resolved = memory_plan.plan_run(config, torch.device("cpu"))
    assert resolved.acceleration.blocks_to_swap == 0 and config.acceleration.blocks_to_swap == "auto"
    # On a CUDA card one swapped block is lighter than none: a budget between the two picks 1.
    cuda = torch.device("cuda")  # only named: the free memory is patched and nothing is allocated
    zero, one = (
        estimate_training_memory(checkpoint_config, TrainingSettings(**{**settings.__dict__, "blocks_to_swap": n}),
                                 shape, cuda).peak
        for n in range(2)
    )  # fmt: skip
    assert one < zero
    monkeypatch.setattr(memory_plan, "free_memory", lambda device: int(one / 0.95) + 1)
    assert memory_plan.plan_run(config, cuda).acceleration.blocks_to_swap == 1
