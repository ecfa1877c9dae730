"""The training loop on a tiny checkpoint and synthetic `.precomputed/` data: every mode, LoRA files,
loss going down, bit-exact resume, NaN handling and configuration errors."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ltx_trainer.config import ConfigError, parse_config
from ltx_trainer.training.checkpoints import ResumeError
from ltx_trainer.training.trainer import Trainer, TrainingDiverged

sys.path.insert(0, str(Path(__file__).parent))
from training_data import MODES, training_config, write_dataset


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})  # noqa: SIM118


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_mode_trains_two_steps_and_saves_a_comfy_lora(mode, checkpoint, data_root, tmp_path):
    config = parse_config(training_config(checkpoint, data_root, tmp_path / "out", mode))
    result = Trainer(config, disable_progress_bars=True).train()
    assert [r.step for r in result.history] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r.loss)) for r in result.history)
    assert result.final_weights == tmp_path / "out" / "checkpoints" / "lora_weights_step_00002.safetensors"
    tensors, meta = _read(result.final_weights)
    assert tensors and all(k.startswith("diffusion_model.transformer_blocks.") for k in tensors)
    assert not any(k.endswith(".alpha") for k in tensors)
    assert {k.rsplit(".", 2)[-2] for k in tensors} == {"lora_A", "lora_B"}
    assert '"name": "flexible"' in meta["training_strategy"]
    # The LoRA moved away from its zero initialisation of B.
    assert any(t.abs().max() > 0 for k, t in tensors.items() if "lora_B" in k)
    assert (tmp_path / "out" / "training_config.yaml").is_file()
    assert (tmp_path / "out" / "checkpoints" / "training_state_step_00002.pt").is_file()


def test_the_connectors_are_released_before_the_first_step(checkpoint, data_root, tmp_path):
    """Every sample's text contexts are kept at the start; the loop then never needs the connectors."""
    config = parse_config(training_config(checkpoint, data_root, tmp_path / "out"))
    trainer = Trainer(config, disable_progress_bars=True)
    cache = trainer.parts.context_cache
    assert cache.connectors is None and len(cache) == len(trainer.parts.dataset)
    assert [r.step for r in trainer.train().history] == [1, 2]


def test_lora_b_carries_alpha_over_rank(checkpoint, data_root, tmp_path):
    config = parse_config(training_config(checkpoint, data_root, tmp_path / "out"))
    trainer = Trainer(config, disable_progress_bars=True)
    trainer.train()
    tensors, _ = _read(trainer.checkpoint_dir / "lora_weights_step_00002.safetensors")
    model = trainer.parts.unwrapped
    param = dict(model.named_parameters())["base_model.model.transformer_blocks.0.attn1.to_q.lora_B.default.weight"]
    saved = tensors["diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight"]
    assert torch.allclose(saved, param.detach() * (8 / 4))


TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "ff.net.0.proj", "ff.net.2", "proj_out", "audio_proj_out"]


def test_loss_falls_over_a_hundred_steps(checkpoint, data_root, tmp_path):
    raw = training_config(
        checkpoint, data_root, tmp_path / "out", "t2v",
        optimization={"steps": 100, "learning_rate": 1e-2, "scheduler_type": "constant", "batch_size": 2},
        lora={"rank": 8, "alpha": 8, "target_modules": TARGETS},
        flow_matching={"timestep_sampling_mode": "uniform",
                       "timestep_sampling_params": {"min_value": 0.4, "max_value": 0.6}},
    )  # fmt: skip
    history = Trainer(parse_config(raw), disable_progress_bars=True).train().history
    first = sum(r.loss for r in history[:10]) / 10
    last = sum(r.loss for r in history[-10:]) / 10
    assert last < 0.8 * first, (first, last)


def _state(trainer: Trainer) -> tuple[dict[str, torch.Tensor], dict, float]:
    model = trainer.parts.unwrapped
    weights = {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}
    return weights, trainer.parts.optimizer.state_dict(), trainer.parts.scheduler.get_last_lr()[0]


def test_resume_is_bit_exact(checkpoint, data_root, tmp_path):
    overrides = {
        "optimization": {"steps": 10, "learning_rate": 1e-3, "scheduler_type": "cosine", "batch_size": 2,
                         "gradient_accumulation_steps": 2},
        "checkpoints": {"interval": 5, "keep_last_n": -1, "precision": "bfloat16", "save_training_state": "full"},
    }  # fmt: skip
    straight = Trainer(parse_config(training_config(checkpoint, data_root, tmp_path / "a", **overrides)))
    straight_history = straight.train().history

    first = Trainer(parse_config(training_config(checkpoint, data_root, tmp_path / "b", **overrides)))
    first.train(stop_at=5)
    resumed_cfg = training_config(checkpoint, data_root, tmp_path / "b", **overrides)
    resumed_cfg["model"]["load_checkpoint"] = str(tmp_path / "b" / "checkpoints")
    second = Trainer(parse_config(resumed_cfg))
    resumed_history = second.train().history

    assert [r.step for r in resumed_history] == list(range(6, 11))
    assert [r.loss for r in resumed_history] == [r.loss for r in straight_history[5:]]
    w1, o1, lr1 = _state(straight)
    w2, o2, lr2 = _state(second)
    assert lr1 == lr2
    for key in w1:
        assert torch.equal(w1[key], w2[key]), key
    for index, state in o1["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(o2["state"][index][name])), (index, name)


def test_resume_with_other_settings_is_refused(checkpoint, data_root, tmp_path):
    cfg = training_config(
        checkpoint, data_root, tmp_path / "a", checkpoints={"interval": 1, "save_training_state": "full"}
    )
    Trainer(parse_config(cfg)).train(stop_at=1)
    cfg["model"]["load_checkpoint"] = str(tmp_path / "a" / "checkpoints")
    cfg["optimization"]["learning_rate"] = 5e-3
    with pytest.raises(ResumeError, match="different settings"):
        Trainer(parse_config(cfg)).train()


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(checkpoint, data_root, tmp_path):
    cfg = parse_config(
        training_config(
            checkpoint,
            data_root,
            tmp_path / "out",
            optimization={"steps": 4},
            checkpoints={"interval": 2, "keep_last_n": 1},
        )
    )
    trainer = Trainer(cfg, disable_progress_bars=True)

    def poison(record):
        if record.step == 2:
            with torch.no_grad():
                for name, p in trainer.parts.unwrapped.named_parameters():
                    if "lora_A" in name:
                        p.fill_(float("nan"))

    with pytest.raises(TrainingDiverged, match=r"loss is nan at step 3.*lora_weights_step_00002"):
        trainer.train(on_step=poison)
    good = trainer.checkpoint_dir / "lora_weights_step_00002.safetensors"
    tensors, _ = _read(good)
    assert all(torch.isfinite(t).all() for t in tensors.values())


def test_nan_in_the_training_data_names_the_sample_and_its_file(checkpoint, tmp_path):
    """A NaN in one sample's latents stops the run naming that sample, its file and the tensor."""
    from ltx_trainer.preprocessing.precomputed import load_sample, sample_path, save_sample

    root = write_dataset(tmp_path / "data")
    poisoned = sample_path(root, "latents", Path("videos/clip02.mp4"))
    sample = load_sample(poisoned)
    latents = sample.tensors["latents"].clone()
    latents[0, 0] = float("nan")
    save_sample(poisoned, {**sample.tensors, "latents": latents}, metadata=sample.metadata)
    cfg = parse_config(training_config(checkpoint, root, tmp_path / "out", optimization={"steps": 4}))
    named = rf"loss is nan at step \d on sample 'videos/clip02.*{re.escape(str(poisoned))}' holds NaN/inf in latents"
    with pytest.raises(TrainingDiverged, match=named):
        Trainer(cfg, disable_progress_bars=True).train()


def test_progress_lines_are_parseable(checkpoint, data_root, tmp_path, caplog):
    import logging
    import re

    cfg = parse_config(training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 2}))
    with caplog.at_level(logging.INFO, logger="ltx_trainer.training.trainer"):
        Trainer(cfg, disable_progress_bars=True, log_every=1).train()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    pattern = re.compile(r"^step (\d+)/2 loss ([\d.]+) lr ([\d.e+-]+) step_time ([\d.]+)s peak_mem ([\d.]+)MB$")
    assert [pattern.match(line).group(1) for line in lines] == ["1", "2"]


# -- configuration errors ---------------------------------------------------------------------------
def test_no_generated_modality_is_rejected_with_its_path(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path, "a2v")
    raw["training_strategy"]["video"] = {"latents_dir": "latents", "is_generated": False}
    with pytest.raises(ConfigError, match=r"training_strategy: .*no generated modality"):
        parse_config(raw)


def test_first_frame_on_audio_is_rejected(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path, "t2a")
    raw["training_strategy"]["audio"]["conditions"] = [{"type": "first_frame"}]
    with pytest.raises(ConfigError, match=r"audio\.conditions\.0: 'first_frame' is a video-only condition"):
        parse_config(raw)


def test_missing_data_folder_is_named(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path, "video_inpainting")
    raw["training_strategy"]["video"]["conditions"][0]["mask_dir"] = "no_such_masks"
    with pytest.raises(ConfigError, match=r"training_strategy\.video\.conditions\.0\.mask_dir: folder 'no_such_masks'"):
        parse_config(raw)
    raw = training_config(checkpoint, tmp_path / "nowhere", tmp_path)
    with pytest.raises(ConfigError, match=r"data\.preprocessed_data_root: .*is not a directory"):
        parse_config(raw)


def test_unknown_fields_and_bad_choices_name_path_and_accepted_values(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path, optimization={"scheduler_type": "exp", "stepz": 3})
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    text = str(info.value)
    assert "optimization.stepz: unknown field" in text
    assert "optimization.scheduler_type: Input should be 'constant', 'linear', 'cosine'" in text


def test_legacy_strategy_loads_with_a_deprecation_warning(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path)
    raw["training_strategy"] = {"name": "text_to_video", "first_frame_conditioning_p": 0.25, "with_audio": True}
    with pytest.warns(DeprecationWarning, match="text_to_video"):
        config = parse_config(raw)
    strategy = config.training_strategy
    assert strategy.video.conditions[0].type == "first_frame" and strategy.video.conditions[0].probability == 0.25
    assert strategy.audio is not None and strategy.audio.latents_dir == "audio_latents"


def test_adamw8bit_without_cuda_is_a_clear_error(checkpoint, data_root, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    cfg = parse_config(training_config(checkpoint, data_root, tmp_path, optimization={"optimizer_type": "adamw8bit"}))
    with pytest.raises(ValueError, match="adamw8bit.*needs CUDA"):
        Trainer(cfg)


def test_full_training_saves_model_weights_and_resumes(checkpoint, data_root, tmp_path):
    raw = training_config(
        checkpoint, data_root, tmp_path / "out", "t2a",
        model={"model_path": str(checkpoint), "training_mode": "full"},
        optimization={"steps": 3, "learning_rate": 1e-4},
        checkpoints={"interval": 2, "save_training_state": "full"},
    )  # fmt: skip
    raw.pop("lora")
    Trainer(parse_config(raw)).train(stop_at=2)
    saved = tmp_path / "out" / "checkpoints" / "model_weights_step_00002.safetensors"
    tensors, meta = _read(saved)
    assert all(k.startswith("model.diffusion_model.") for k in tensors) and "config" in meta
    raw["model"]["load_checkpoint"] = str(saved)
    history = Trainer(parse_config(raw)).train().history
    assert [r.step for r in history] == [3]


def test_wandb_without_the_package_fails_before_training(checkpoint, data_root, tmp_path):
    try:
        import wandb  # noqa: F401

        pytest.skip("wandb is installed")
    except ImportError:
        pass
    cfg = parse_config(training_config(checkpoint, data_root, tmp_path, wandb={"enabled": True}))
    with pytest.raises(ValueError, match=r"pip install 'ltx-trainer\[wandb\]'"):
        Trainer(cfg)


def test_hub_push_uploads_the_final_weights(checkpoint, data_root, tmp_path):
    from ltx_trainer.training.reporting import push_to_hub

    class FakeApi:
        def __init__(self):
            self.calls = []

        def create_repo(self, repo_id, **kwargs):
            self.calls.append(("create_repo", repo_id))

        def upload_file(self, *, path_or_fileobj, path_in_repo, repo_id):
            self.calls.append(("upload", path_in_repo, repo_id))

    raw = training_config(checkpoint, data_root, tmp_path / "out", hub={"push_to_hub": True, "hub_model_id": "me/lora"})
    cfg = parse_config(raw)
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"x")
    api = FakeApi()
    push_to_hub(cfg, weights, api=api)
    assert api.calls[0] == ("create_repo", "me/lora")
    assert ("upload", "w.safetensors", "me/lora") in api.calls and ("upload", "README.md", "me/lora") in api.calls


def test_gradient_checkpointing_trains_identically(checkpoint, data_root, tmp_path):
    results = []
    for enabled in (False, True):
        raw = training_config(
            checkpoint, data_root, tmp_path / f"out-{enabled}",
            optimization={"steps": 2, "enable_gradient_checkpointing": enabled},
        )  # fmt: skip
        trainer = Trainer(parse_config(raw))
        history = trainer.train().history
        results.append(([r.loss for r in history], _state(trainer)[0]))
    (loss_a, w_a), (loss_b, w_b) = results
    assert loss_a == pytest.approx(loss_b, abs=1e-6)
    for key in w_a:
        torch.testing.assert_close(w_a[key], w_b[key], atol=1e-6, rtol=1e-5)


def test_a_new_run_refuses_an_output_dir_with_checkpoints(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 1})
    Trainer(parse_config(raw)).train()
    with pytest.raises(ValueError, match="already holds checkpoints"):
        Trainer(parse_config(raw))
