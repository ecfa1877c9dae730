"""The configuration reference page is generated from the schema and must be current."""

from __future__ import annotations

from pathlib import Path

from ltx_trainer.config_reference import render_reference

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_configuration_reference_is_current():
    page = (DOCS / "configuration-reference.md").read_text(encoding="utf-8")
    assert page == render_reference(), (
        "docs/configuration-reference.md is stale: run "
        "`uv run python -m ltx_trainer.config_reference > packages/ltx-trainer/docs/configuration-reference.md`"
    )


def test_reference_lists_every_section_and_condition():
    page = render_reference()
    for heading in ("## `model`", "## `lora`", "## `optimization`", "## `checkpoints`", "### `spatial_crop`",
                    "### `video_to_audio`"):  # fmt: skip
        assert heading in page
