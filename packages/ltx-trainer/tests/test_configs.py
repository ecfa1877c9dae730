"""The ready-made configs in configs/: each loads once its placeholder paths point at real files, and the
mode configs carry the reference's strategy blocks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from ltx_trainer.config import FlexibleStrategyConfig, parse_config

sys.path.insert(0, str(Path(__file__).parent))
from training_data import write_dataset

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PACKAGE_FROM_REPO = Path("packages/ltx-trainer")


def _mode_configs() -> list[Path]:
    return sorted(CONFIGS.glob("*.yaml"))


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    root = tmp_path_factory.mktemp("stand-ins")
    model = root / "model.safetensors"
    model.write_bytes(b"")
    gemma = root / "gemma"
    gemma.mkdir()
    return model, gemma, write_dataset(root / "data", num_samples=1)


@pytest.mark.parametrize("path", _mode_configs(), ids=lambda p: p.stem)
def test_config_loads_with_real_paths(path, stand_ins, tmp_path):
    model, gemma, data = stand_ins
    raw = yaml.safe_load(path.read_text())
    assert raw["model"]["model_path"].startswith("/path/to/"), "configs carry placeholders, not real paths"
    raw["model"]["model_path"] = str(model)
    raw["model"]["text_encoder_path"] = str(gemma)
    raw["data"]["preprocessed_data_root"] = str(data)
    raw["output_dir"] = str(tmp_path / "out")
    config = parse_config(raw)
    assert config.training_strategy.name == "flexible"


def test_every_reference_mode_has_a_config():
    names = {p.stem for p in _mode_configs()}
    assert len(names) == 16  # 15 modes + the low-VRAM text-to-video variant
    for accel in ("ddp", "fsdp"):
        data = yaml.safe_load((CONFIGS / "accelerate" / f"{accel}.yaml").read_text())
        assert data["distributed_type"] in ("MULTI_GPU", "FSDP")


def _shape_of(block):
    """A strategy block without the numbers the fixture adapted to its tiny latents."""
    if isinstance(block, dict):
        return {
            k: _shape_of(v) for k, v in block.items() if k not in ("temporal_boundary", "spatial_region", "probability")
        }
    if isinstance(block, list):
        return [_shape_of(v) for v in block]
    return block


@pytest.mark.golden
def test_mode_configs_match_the_reference_strategy_blocks(golden_fixture):
    params = golden_fixture("fx_training_step").params
    for mode in params["modes"]:
        config_file = Path(params[f"{mode}.config_file"])
        ours = CONFIGS / config_file.relative_to(PACKAGE_FROM_REPO / "configs")
        assert ours.is_file(), f"{mode}: no {ours.name}"
        strategy = yaml.safe_load(ours.read_text())["training_strategy"]
        # Both through the schema, so omitted defaults (is_generated: true, conditions: []) compare equal.
        got = FlexibleStrategyConfig.model_validate(strategy).model_dump(mode="json")
        want = FlexibleStrategyConfig.model_validate(params[f"{mode}.training_strategy"]).model_dump(mode="json")
        assert _shape_of(got) == _shape_of(want), mode


def test_legacy_validation_fields_become_samples():
    from ltx_trainer.config import ValidationConfig

    with pytest.warns(DeprecationWarning):
        v = ValidationConfig.model_validate(
            {"prompts": ["a", "b"], "images": ["a.png", "b.png"], "guidance_scale": 4.0, "stg_scale": 1.0,
             "stg_mode": "stg_v", "video_dims": [64, 64, 9]}
        )  # fmt: skip
    assert [s.prompt for s in v.samples] == ["a", "b"]
    assert [s.conditions[0].type for s in v.samples] == ["first_frame", "first_frame"]
    assert (v.video_cfg_scale, v.audio_cfg_scale, v.video_stg_scale, v.audio_stg_scale) == (4.0, 4.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="cannot be mixed"):
        ValidationConfig.model_validate({"guidance_scale": 4.0, "video_cfg_scale": 3.0})


def test_train_command_reports_config_errors_in_one_line(tmp_path, capsys):
    from ltx_trainer.train import main

    path = tmp_path / "bad.yaml"
    path.write_text("model: {model_path: /nonexistent.safetensors}\ndata: {preprocessed_data_root: /nowhere}\nlr: 3\n")
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid training config:")
    assert "model.model_path: '/nonexistent.safetensors' is not a file" in err
    assert "data.preprocessed_data_root: '/nowhere' is not a directory" in err
    assert "lr: unknown field" in err


@pytest.mark.parametrize("path", _mode_configs(), ids=lambda p: p.stem)
def test_each_interval_says_what_null_means_where_it_is_set(path):
    """Issue 32.4: `validation.interval: null` means never, `checkpoints.interval: null` the final checkpoint only.
    The two differ, so each example config says it on the line that sets it, in the schema's own words."""
    import re

    from ltx_trainer.config import CheckpointsConfig, ValidationConfig

    section = None
    said: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if heading := re.match(r"^([a-z_]+):\s*$", line):
            section = heading.group(1)
        elif line.startswith("  interval: ") and section in ("validation", "checkpoints"):
            said[section] = line.partition("#")[2]
    for section, model in (("validation", ValidationConfig), ("checkpoints", CheckpointsConfig)):
        meaning = re.search(r"\((null = [^)]+)\)", model.model_fields["interval"].description).group(1)
        assert meaning.rstrip(".") in said.get(section, ""), f"{section}.interval: {meaning!r} not said"
