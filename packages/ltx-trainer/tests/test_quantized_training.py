"""LoRA training on an optimum-quanto quantized base (`acceleration.quantization`), on the CPU.

The blocks' Linear layers become quanto layers with int8 weights while the in/out projections, AdaLN and
timestep layers stay plain; only the adapters train; the saved LoRA has the format of an unquantized run
and, loaded by the pipelines' builder over the full-precision checkpoint, changes the output as it did in
training; resume works and refuses a mismatched quantization. Also: the configuration and start-up
errors for quantization and for the 8-bit Gemma flags.
"""

from __future__ import annotations

import sys
from pathlib import Path

import optimum.quanto as quanto
import pytest
import torch
from safetensors import safe_open
from torch import nn
from typer.testing import CliRunner

import ltx_trainer.training.quantization as quantization
from ltx_core.loader import LoraSpec, build_model
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_trainer.config import ConfigError, parse_config
from ltx_trainer.training.checkpoints import ResumeError
from ltx_trainer.training.data import collate
from ltx_trainer.training.draws import PerSampleDraws
from ltx_trainer.training.quantization import (
    PACKED_SETTINGS,
    QUANTO_WEIGHT_TYPES,
    check_quantization_device,
    cpp_compiler,
    keeps_full_precision,
    quantize_transformer,
)
from ltx_trainer.training.step import text_contexts, to_device
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config

TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "ff.net.0.proj"]
# Top-level layers of the transformer that must stay in full precision (a sample of each kind).
KEPT = [
    "patchify_proj",
    "proj_out",
    "audio_patchify_proj",
    "audio_proj_out",
    "adaln_single.linear",
    "adaln_single.emb.timestep_embedder.linear_1",
    "audio_prompt_adaln_single.emb.timestep_embedder.linear_2",
    "av_ca_a2v_gate_adaln_single.linear",
]


def _config(checkpoint: Path, data_root: Path, out: Path, quantization: str | None = "int8-quanto", **overrides):
    overrides.setdefault("lora", {"rank": 4, "alpha": 8, "target_modules": TARGETS})
    acceleration = {"mixed_precision_mode": "no", "quantization": quantization, **overrides.pop("acceleration", {})}
    return training_config(checkpoint, data_root, out, "t2v", acceleration=acceleration, **overrides)


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})  # noqa: SIM118


def _base_linears(model: nn.Module) -> dict[str, nn.Module]:
    """The base model's Linear layers by their own path (peft's wrappers and adapters left out)."""
    out = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear) or ".lora_" in name:
            continue
        out[name.removeprefix("base_model.model.").replace(".base_layer", "")] = module
    return out


@pytest.fixture(scope="module")
def int8_run(checkpoint, data_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("int8") / "out"
    # A large learning rate makes the adapters' effect large next to the int8 rounding of the base.
    raw = _config(checkpoint, data_root, out, optimization={"steps": 2, "learning_rate": 3e-2})
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)
    before = {n: m.weight._data.clone() for n, m in _base_linears(trainer.parts.unwrapped).items()
              if isinstance(m, quanto.QLinear)}  # fmt: skip
    result = trainer.train()
    return trainer, result, before


def test_int8_run_trains_two_steps_with_int8_block_weights(int8_run):
    trainer, result, _ = int8_run
    assert [r.step for r in result.history] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r.loss)) for r in result.history)
    linears = _base_linears(trainer.parts.unwrapped)
    in_blocks = {n: m for n, m in linears.items() if n.startswith("transformer_blocks.")}
    assert len(in_blocks) > 30
    for name, module in in_blocks.items():
        assert isinstance(module, quanto.QLinear), name
        assert module.weight_qtype == quanto.qint8, name
        assert module.weight._data.dtype == torch.int8, name
    for name in KEPT:
        assert type(linears[name]) is nn.Linear, name
    assert all(type(m) is nn.Linear for n, m in linears.items() if not n.startswith("transformer_blocks."))


def test_only_the_adapters_train_and_the_quantized_weights_stay_put(int8_run):
    trainer, _, before = int8_run
    model = trainer.parts.unwrapped
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    assert {id(p) for p in trainer.parts.trainable} == {id(p) for p in model.parameters() if p.requires_grad}
    after = _base_linears(model)
    assert before and all(torch.equal(after[n].weight._data, data) for n, data in before.items())
    lora_b = [p for n, p in model.named_parameters() if ".lora_B." in n]
    assert any(float(p.detach().abs().max()) > 0 for p in lora_b), "the adapters should have moved from B = 0"


def test_the_saved_lora_has_the_format_of_an_unquantized_run(int8_run, checkpoint, data_root, tmp_path):
    result = int8_run[1]
    plain = Trainer(parse_config(_config(checkpoint, data_root, tmp_path / "plain", None)), disable_progress_bars=True)
    plain_file = plain.train().final_weights
    assert result.final_weights.name == plain_file.name == "lora_weights_step_00002.safetensors"
    got, got_meta = _read(result.final_weights)
    want, want_meta = _read(plain_file)
    assert {k: (v.shape, v.dtype) for k, v in got.items()} == {k: (v.shape, v.dtype) for k, v in want.items()}
    assert all(v.dtype == torch.float32 for v in got.values())
    assert got_meta == want_meta


def test_the_saved_lora_changes_the_pipeline_model_as_it_did_in_training(int8_run, checkpoint):
    """The pipelines fuse the file into the full-precision checkpoint; the change it makes there equals
    the adapters' change on the quantized training model, up to int8 rounding of the base."""
    trainer, result, _ = int8_run
    peft_model = trainer.parts.unwrapped.eval()
    args = _model_inputs(trainer, seed=5)
    with torch.no_grad():
        trained_v, _ = peft_model(*args)
        with peft_model.disable_adapter():
            quantized_base_v, _ = peft_model(*args)
        fused_v, _ = build_model(AV_TRANSFORMER, checkpoint, loras=[LoraSpec(result.final_weights)])(*args)
        base_v, _ = build_model(AV_TRANSFORMER, checkpoint)(*args)
    effect_in_training = trained_v - quantized_base_v
    effect_in_pipeline = fused_v - base_v
    assert float(effect_in_training.abs().max()) > 1e-3, "the LoRA should change the output"
    error = float((effect_in_pipeline - effect_in_training).norm() / effect_in_training.norm())
    # A wrong alpha/rank scale would miss by 50% or more; int8 rounding of the base costs well under 5%.
    assert error < 0.05, error


def test_bf16_autocast_run_on_a_quantized_base_trains_from_the_command_line(checkpoint, data_root, tmp_path):
    """bf16 is the default mixed precision; on the CPU it needs the quantized base in bf16 (quanto's int8
    CPU kernel). Run in a subprocess: accelerate allows one mixed-precision mode per process."""
    import os
    import subprocess

    import yaml

    raw = _config(checkpoint, data_root, tmp_path / "out", acceleration={"mixed_precision_mode": "bf16"})
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run(
        [sys.executable, "-m", "ltx_trainer.train", str(config), "--disable-progress-bars", "--log-every", "1"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "quantized" in run.stdout and "step 2/2 loss" in run.stdout
    saved, _ = _read(tmp_path / "out" / "checkpoints" / "lora_weights_step_00002.safetensors")
    assert saved and all(torch.isfinite(t).all() for t in saved.values())


def test_resume_on_a_quantized_base_continues_bit_for_bit(checkpoint, data_root, tmp_path):
    overrides = {
        "optimization": {"steps": 4, "learning_rate": 1e-3, "scheduler_type": "cosine", "batch_size": 2},
        "checkpoints": {"interval": 2, "keep_last_n": -1, "precision": "float32", "save_training_state": "full"},
    }
    straight = Trainer(parse_config(_config(checkpoint, data_root, tmp_path / "a", **overrides)))
    straight_history = straight.train().history
    Trainer(parse_config(_config(checkpoint, data_root, tmp_path / "b", **overrides))).train(stop_at=2)
    resumed_raw = _config(checkpoint, data_root, tmp_path / "b", **overrides)
    resumed_raw["model"]["load_checkpoint"] = str(tmp_path / "b" / "checkpoints")
    resumed = Trainer(parse_config(resumed_raw))
    history = resumed.train().history
    assert [r.step for r in history] == [3, 4]
    assert [r.loss for r in history] == [r.loss for r in straight_history[2:]]
    a, _ = _read(straight.checkpoint_dir / "lora_weights_step_00004.safetensors")
    b, _ = _read(resumed.checkpoint_dir / "lora_weights_step_00004.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resume_with_another_quantization_is_refused(checkpoint, data_root, tmp_path):
    raw = _config(checkpoint, data_root, tmp_path / "a", checkpoints={"interval": 1})
    Trainer(parse_config(raw)).train(stop_at=1)
    for other in (None, "int4-quanto"):
        raw = _config(checkpoint, data_root, tmp_path / "a", other, checkpoints={"interval": 1})
        raw["model"]["load_checkpoint"] = str(tmp_path / "a" / "checkpoints")
        with pytest.raises(ResumeError, match="different settings"):
            Trainer(parse_config(raw)).train()


def _model_inputs(trainer: Trainer, seed: int):
    batch = to_device(trainer.parts, collate([trainer.parts.dataset[0], trainer.parts.dataset[1]]))
    inputs = trainer.parts.strategy.prepare(
        batch, text_contexts(trainer.parts, batch, [0, 1]), PerSampleDraws(seed, 0, [0, 1])
    )
    return inputs.video.modality, inputs.audio.modality


def _setting_case(setting: str):
    # int4/int2 run through a C++ extension optimum-quanto compiles on first use (about 20 s, once).
    needs_compiler = setting in PACKED_SETTINGS and cpp_compiler() is None
    return pytest.param(setting, marks=pytest.mark.skipif(needs_compiler, reason="needs a C++ compiler"))


@pytest.mark.parametrize("setting", [_setting_case(s) for s in sorted(QUANTO_WEIGHT_TYPES)])
def test_every_setting_quantizes_the_blocks_to_its_type_and_still_runs(setting, int8_run, checkpoint):
    args = _model_inputs(int8_run[0], seed=1)
    model = build_model(AV_TRANSFORMER, checkpoint)
    with torch.no_grad():
        want, _ = model(*args)
    done = quantize_transformer(model, setting, torch.device("cpu"), progress=False)
    modules = dict(model.named_modules())
    assert done.quantized and all(n.startswith("transformer_blocks.") for n in done.quantized)
    expected = {"int8-quanto": quanto.qint8, "int4-quanto": quanto.qint4, "int2-quanto": quanto.qint2,
                "fp8-quanto": quanto.qfloat8, "fp8uz-quanto": quanto.qfloat8_e4m3fnuz}[setting]  # fmt: skip
    assert all(modules[n].weight_qtype == expected for n in done.quantized)
    assert all(type(modules[n]) is nn.Linear for n in done.kept)
    assert not any(p.requires_grad for p in model.parameters())
    with torch.no_grad():
        got, _ = model(*args)
    assert torch.isfinite(got).all()
    if setting == "int8-quanto":  # 8 bits per weight: close to the float model
        assert float((got - want).norm() / want.norm()) < 0.05


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_quantizing_onto_cuda_moves_every_block_and_keeps_the_outputs_close(checkpoint):
    model = build_model(AV_TRANSFORMER, checkpoint, dtype=torch.bfloat16, device="cpu")
    reference = build_model(AV_TRANSFORMER, checkpoint, dtype=torch.bfloat16, device="cuda")
    done = quantize_transformer(model, "int8-quanto", torch.device("cuda"), progress=False)
    assert done.quantized
    assert all(t.is_cuda for t in model.state_dict().values())
    modules = dict(model.named_modules())
    assert all(modules[n].weight._data.dtype == torch.int8 for n in done.quantized)
    block = reference.transformer_blocks[0]
    tokens = torch.randn(1, 8, block.attn1.to_q.in_features, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        want = reference.transformer_blocks[0].ff(tokens).float()
        got = model.transformer_blocks[0].ff(tokens).float()
    assert float((got - want).norm() / want.norm()) < 0.05


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("patchify_proj", True),
        ("audio_proj_out", True),
        ("adaln_single.emb.timestep_embedder.linear_1", True),
        ("caption_projection.linear_2", True),
        ("transformer_blocks.3.norm1", True),
        ("transformer_blocks.0.attn1.to_q", False),
        ("transformer_blocks.0.ff.net.2", False),
        ("transformer_blocks.0.audio_to_video_attn.to_out.0", False),
    ],
)
def test_full_precision_layers_are_chosen_by_the_reference_patterns(name, kept):
    assert keeps_full_precision(name) is kept


# -- configuration and start-up errors ----------------------------------------------------------------------


def test_full_training_with_quantization_fails_at_config_load(checkpoint, data_root, tmp_path):
    raw = _config(checkpoint, data_root, tmp_path, "int8-quanto")
    raw["model"]["training_mode"] = "full"
    with pytest.raises(ConfigError, match=r"acceleration\.quantization: 'int8-quanto' needs model\.training_mode "
                       r"'lora'.*accepted value is null"):  # fmt: skip
        parse_config(raw)


def test_unknown_quantization_lists_the_accepted_values(checkpoint, data_root, tmp_path):
    with pytest.raises(ConfigError, match=r"acceleration\.quantization: .*'int8-quanto'.*'fp8uz-quanto'"):
        parse_config(_config(checkpoint, data_root, tmp_path, "int3-quanto"))


def test_quantization_without_optimum_quanto_names_the_extra(checkpoint, data_root, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optimum.quanto", None)  # makes `import optimum.quanto` fail
    cfg = parse_config(_config(checkpoint, data_root, tmp_path / "out"))
    with pytest.raises(ValueError, match=r"needs optimum-quanto.*ltx-trainer\[quanto\]"):
        Trainer(cfg)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_8bit_text_encoder_without_cuda_fails_at_trainer_start(checkpoint, data_root, tmp_path):
    cfg = parse_config(_config(checkpoint, data_root, tmp_path / "out", None,
                               acceleration={"load_text_encoder_in_8bit": True}))  # fmt: skip
    with pytest.raises(ValueError, match=r"acceleration\.load_text_encoder_in_8bit: an 8-bit Gemma .* needs a CUDA"):
        Trainer(cfg)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
@pytest.mark.parametrize("command", ["process_captions", "process_dataset"])
def test_8bit_text_encoder_flag_without_cuda_fails_at_cli_start(command, tmp_path):
    import importlib

    app = importlib.import_module(f"ltx_trainer.{command}").app
    dataset = tmp_path / "missing.csv"  # never read: the flag is checked first
    args = [str(dataset), "--model-path", str(tmp_path / "m.safetensors"), "--text-encoder-path", str(tmp_path),
            "--load-text-encoder-in-8bit", "--device", "cpu"]  # fmt: skip
    if command == "process_captions":
        args += ["--output-dir", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "error: --load-text-encoder-in-8bit: an 8-bit Gemma text encoder needs a CUDA device" in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_pipeline_with_8bit_gemma_on_the_cpu_is_refused_at_construction(checkpoint, tmp_path):
    from ltx_pipelines import TI2VidOneStagePipeline

    with pytest.raises(ValueError, match=r"gemma_8bit: an 8-bit Gemma text encoder needs a CUDA device"):
        TI2VidOneStagePipeline(checkpoint, tmp_path, device="cpu", dtype=torch.float32, gemma_8bit=True)


def test_sub_byte_weights_on_the_cpu_without_a_compiler_are_refused_before_loading(monkeypatch):
    monkeypatch.setattr(quantization, "cpp_compiler", lambda: None)
    with pytest.raises(ValueError, match="'int4-quanto' on the CPU needs a C\\+\\+ compiler"):
        check_quantization_device("int4-quanto", torch.device("cpu"))
    check_quantization_device("int8-quanto", torch.device("cpu"))  # no extension needed
