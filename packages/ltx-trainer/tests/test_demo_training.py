"""`python -m ltx_trainer.train --demo`: synthetic clips -> process_dataset -> the patched example config ->
a CPU training with checkpoints and a validation sample, on the demo models; its checkpoint and Gemma
folder are printed for use as the dev checkpoint and Gemma elsewhere."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from ltx_trainer import train
from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.training import demo


@pytest.mark.slow
def test_train_demo_prepares_trains_and_names_the_models(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # The documented run has 20 steps; two keep the test short and still save, resume-check and validate.
    monkeypatch.setitem(demo.DEMO_PATCHES, "optimization.steps", 2)
    monkeypatch.setitem(demo.DEMO_PATCHES, "validation.interval", 2)
    monkeypatch.setitem(demo.DEMO_PATCHES, "checkpoints.interval", 1)
    folder = tmp_path / "demo"
    assert train.main(["--demo", "--demo-dir", str(folder), "--disable-progress-bars", "--log-every", "1"]) == 0
    out = capsys.readouterr().out

    rows = json.loads((folder / "dataset" / "dataset.json").read_text())
    assert len(rows) == 4
    pre = folder / "dataset" / ".precomputed"
    assert len(pc.find_samples(pre / pc.LATENTS)) == 4 and len(pc.find_samples(pre / pc.AUDIO_LATENTS)) == 4
    assert pc.read_manifest(pre)["lora_trigger"] == demo.DEMO_TRIGGER
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["model"]["model_path"] == str(demo.demo_run_at(folder).checkpoint)
    assert config["training_strategy"] == yaml.safe_load(demo.EXAMPLE_CONFIG.read_text())["training_strategy"]
    checkpoints = sorted((folder / "outputs" / "checkpoints").glob("lora_weights_step_*.safetensors"))
    assert [p.name for p in checkpoints] == [f"lora_weights_step_0000{i}.safetensors" for i in (1, 2)]
    assert list((folder / "outputs" / "samples").glob("*.mp4"))

    model = re.search(r"^model \(use as <MODEL>, the dev checkpoint\): (.+)$", out, re.M)
    gemma = re.search(r"^gemma \(use as <GEMMA>\): (.+)$", out, re.M)
    assert model and gemma
    assert model.group(1) == str(tmp_path / "cache" / "ltx2-demo" / "v1" / "ltx-demo-distilled.safetensors")
    assert (tmp_path / "cache" / "ltx2-demo" / "v1" / "gemma-3-demo").samefile(gemma.group(1))

    # A second demo into the same folder is refused before any work, naming the folder.
    assert train.main(["--demo", "--demo-dir", str(folder)]) == 1
    assert str(folder) in capsys.readouterr().err


def test_train_needs_a_config_or_demo(capsys):
    with pytest.raises(SystemExit) as info:
        train.main([])
    assert info.value.code == 2 and "give a config file, or --demo" in capsys.readouterr().err


def test_demo_refuses_a_folder_that_holds_anything(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert train.main(["--demo", "--demo-dir", str(tmp_path)]) == 1
    assert "is not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"] and (tmp_path / "notes.txt").read_text() == "mine"
