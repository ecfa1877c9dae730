"""The plan's table of settings per card: its cells, and the copies in the trainer docs and the skill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipelines.demo.ltx23 import DEMO_CONFIG
from ltx_trainer.memory_table import TableRow, default_rows, fit_table, markdown
from ltx_trainer.training.memory_estimate import (
    TrainingSettings,
    TrainingShape,
    estimate_training_memory,
    setting_ladder,
)

ROOT = Path(__file__).resolve().parents[3]


def test_each_cell_is_the_first_fitting_rung_or_no():
    config = {**DEMO_CONFIG, "transformer": {**DEMO_CONFIG["transformer"], "num_layers": 6}}
    settings = TrainingSettings(lora_rank=8)
    row = TableRow("demo", settings, TrainingShape(4000, 100, 128))
    ladder = [settings, *setting_ladder(settings, 6)]
    peaks = [estimate_training_memory(config, s, row.shape).peak for s in ladder]
    cards = [min(peaks) / 2**30 * 0.5, peaks[2] / 0.95 / 2**30, max(peaks) / 0.95 / 2**30 * 1.01]
    [(_, cells)] = fit_table(config, [row], cards)
    assert cells[0] == "no"
    assert cells[1].startswith("ckpt + offload (")  # the third rung: checkpointing and offload, nothing swapped
    assert cells[2].startswith("as is (")


def test_rows_cover_the_runs_users_ask_for():
    names = [r.name for r in default_rows()]
    assert len(names) == 8 and "rank 32, 768x512x49, audio-video" in names
    av49 = next(r for r in default_rows() if r.name == "rank 32, 768x512x49, audio-video")
    assert (av49.shape.video_tokens, av49.shape.audio_tokens) == (7 * 16 * 24, 51)


@pytest.mark.slow
def test_docs_and_skill_hold_the_table_the_plan_prints():
    config = json.loads((ROOT / "tests/golden/ltx-2.3-22b-keys.json").read_text())["config"]
    table = markdown(fit_table(config, default_rows()))
    for doc in (
        "packages/ltx-trainer/docs/troubleshooting.md",
        ".claude/skills/train-model/references/hardware-profiles.md",
    ):
        assert table in (ROOT / doc).read_text(), f"{doc}: rerun `python -m ltx_trainer.memory_table` and paste"
    # The goals, per the plan.
    rows = dict(fit_table(config, [r for r in default_rows() if "x49" in r.name and "rank 32" in r.name]))
    by_name = {row.name: cells for row, cells in rows.items()}
    assert by_name["rank 32, 768x512x49, audio-video"][1] != "no"  # 16 GB
    assert by_name["rank 32, 768x512x49, video-only"][0] != "no"  # 12 GB
