"""A trained LoRA file changes the pipelines' output as the trained peft model predicts.

The pipelines build their transformer with `build_model(..., loras=[LoraSpec(file)])`; the file has
alpha / rank baked into lora_B and no alpha entry, so strength 1 must reproduce the peft forward. The
tolerance leaves room for the precision of the loader's fusion rule (a bfloat16 rounding of the fused
weights would be a small fraction of the LoRA's own effect), and the LoRA's effect is made large so
that a wrong scale (e.g. alpha/rank applied twice or not at all) fails clearly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from ltx_core.loader import LoraSpec, build_model
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_trainer.config import parse_config
from ltx_trainer.training.draws import PerSampleDraws
from ltx_trainer.training.step import text_contexts, to_device
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config, write_dataset


@pytest.fixture(scope="module")
def trained(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora-run")
    data = write_dataset(root / "data")
    raw = training_config(
        tiny_models.checkpoint, data, root / "out", "t2v",
        optimization={"steps": 3, "learning_rate": 3e-2, "scheduler_type": "constant"},
        lora={"rank": 4, "alpha": 16, "target_modules": ["to_q", "to_k", "to_v", "to_out.0", "ff.net.0.proj"]},
    )  # fmt: skip
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)
    result = trainer.train()
    return trainer, result.final_weights


def _effect_tolerance(with_lora: torch.Tensor, without: torch.Tensor) -> float:
    return 1e-4 + 0.02 * float((with_lora - without).abs().max())


def test_file_through_the_pipeline_loader_matches_the_peft_forward(trained, tiny_models):
    trainer, lora_file = trained
    peft_model = trainer.parts.unwrapped.eval()
    batch = to_device(trainer.parts, _first_batch(trainer))
    inputs = trainer.parts.strategy.prepare(
        batch, text_contexts(trainer.parts, batch, [0, 1]), PerSampleDraws(123, 0, [0, 1])
    )
    args = (inputs.video.modality, inputs.audio.modality)
    with torch.no_grad():
        want_v, want_a = peft_model(*args)
        with peft_model.disable_adapter():
            base_v, base_a = peft_model(*args)
        fused = build_model(AV_TRANSFORMER, tiny_models.checkpoint, dtype=torch.float32, loras=[LoraSpec(lora_file)])
        got_v, got_a = fused(*args)
    assert float((want_v - base_v).abs().max()) > 1e-2, "the LoRA should change the output noticeably"
    assert float((got_v - want_v).abs().max()) <= _effect_tolerance(want_v, base_v)
    assert float((got_a - want_a).abs().max()) <= _effect_tolerance(want_a, base_a)


def _first_batch(trainer: Trainer):
    from ltx_trainer.training.data import collate

    return collate([trainer.parts.dataset[0], trainer.parts.dataset[1]])


def test_one_stage_pipeline_output_changes_as_peft_predicts(trained, tiny_models, tmp_path):
    """The one-stage pipeline with `--lora FILE` equals the pipeline over a checkpoint whose transformer
    weights are peft's merged weights."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
    from ltx_pipelines import GuidanceRequest, TI2VidOneStagePipeline, VideoRequest

    trainer, lora_file = trained
    # peft's own delta per adapted layer (scale included), added to the base weights: its merge, without
    # unloading the adapters from the trainer's model.
    peft_model = trainer.parts.unwrapped
    merged_state = {}
    for name, module in peft_model.base_model.model.named_modules():
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer"):
            delta = module.get_delta_weight("default")
            merged_state[f"{name}.weight"] = module.base_layer.weight.detach().float() + delta.detach().float()
    with safe_open(str(tiny_models.checkpoint), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
        metadata = f.metadata()
    for key, value in merged_state.items():
        tensors[f"{TRANSFORMER_PREFIX}{key}"] = value.contiguous()
    merged_ckpt = tmp_path / "merged.safetensors"
    save_file(tensors, str(merged_ckpt), metadata=metadata)

    def run(checkpoint: Path, loras) -> torch.Tensor:
        pipeline = TI2VidOneStagePipeline(
            checkpoint, tiny_models.gemma_root, loras=loras, device="cpu", dtype=torch.float32, progress=False
        )
        generation = pipeline(
            "a red ball",
            seed=3,
            video=VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0),
            guidance=GuidanceRequest(num_inference_steps=2),
        )
        return generation.latents["stage_1.video_latent"]

    base = run(tiny_models.checkpoint, ())
    with_lora = run(tiny_models.checkpoint, (LoraSpec(lora_file),))
    expected = run(merged_ckpt, ())
    assert float((with_lora - base).abs().max()) > 1e-3, "the LoRA should change the output"
    assert float((with_lora - expected).abs().max()) <= _effect_tolerance(expected, base)


@pytest.mark.parametrize("layout", ["diffusers", "kohya"])
def test_saved_and_converted_layouts_fuse_like_the_comfyui_file(trained, tiny_models, tmp_path, layout):
    """`checkpoints.lora_format` files and `convert_lora` outputs give the transformer exactly the weights the
    default (ComfyUI) file gives, and the trainer resumes from them."""
    from ltx_core.loader.lora_layouts import read_lora
    from ltx_trainer.convert_lora import convert_lora
    from ltx_trainer.training.lora_files import (
        adapter_state,
        adapter_state_from_file,
        lora_scale,
        save_lora_file,
    )

    trainer, lora_file = trained
    model = trainer.parts.unwrapped
    lora_cfg = trainer.config.lora
    saved = save_lora_file(tmp_path / f"saved.{layout}.safetensors", model, lora_cfg.rank, lora_cfg.alpha,
                           torch.float32, {"strategy": "t2v"}, layout)  # fmt: skip
    converted = convert_lora(lora_file, tmp_path / f"converted.{layout}.safetensors", layout)
    assert read_lora(saved).layout.value == layout
    assert read_lora(converted).layout.value == layout
    with pytest.raises(FileExistsError):
        convert_lora(saved, converted, layout)

    def transformer_weights(loras):
        built = build_model(AV_TRANSFORMER, tiny_models.checkpoint, dtype=torch.float32, loras=loras)
        return built.state_dict()

    want = transformer_weights([LoraSpec(lora_file, 0.5)])
    for other in (saved, converted):
        got = transformer_weights([LoraSpec(other, 0.5)])
        assert all(torch.equal(got[k], want[k]) for k in want), other.name

    # Resuming reads the file back into the same (unscaled) adapter weights.
    from safetensors import safe_open

    with safe_open(str(saved), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    state = adapter_state_from_file(tensors, lora_scale(lora_cfg.rank, lora_cfg.alpha))
    live = adapter_state(model)
    assert set(state) == set(live)
    for key, value in live.items():
        torch.testing.assert_close(state[key], value.float(), rtol=1e-6, atol=1e-7)


def test_lora_format_is_validated(tiny_models, tmp_path):
    from ltx_trainer.config import ConfigError

    raw = training_config(tiny_models.checkpoint, write_dataset(tmp_path / "data"), tmp_path / "out", "t2v",
                          checkpoints={"lora_format": "safetensors"})  # fmt: skip
    with pytest.raises((ConfigError, ValueError), match="lora_format"):
        parse_config(raw)
    raw["checkpoints"]["lora_format"] = "kohya"
    assert parse_config(raw).checkpoints.lora_format == "kohya"


def test_trainer_saves_checkpoints_in_the_configured_layout(trained, tiny_models):
    """`checkpoints.lora_format: kohya` reaches the file the trainer writes, which fuses like the default."""
    from ltx_core.loader.lora_layouts import LoraLayout, read_lora

    trainer, lora_file = trained
    checkpoints = trainer.config.checkpoints
    checkpoints.lora_format = "kohya"
    try:
        saved = trainer.save_checkpoint(999)
    finally:
        checkpoints.lora_format = "comfyui"
    assert saved is not None and read_lora(saved).layout is LoraLayout.KOHYA

    def weights(path):
        return build_model(AV_TRANSFORMER, tiny_models.checkpoint, loras=[LoraSpec(path)], device="cpu").state_dict()

    want, got = weights(lora_file), weights(saved)
    assert all(torch.equal(got[k], want[k]) for k in want)
