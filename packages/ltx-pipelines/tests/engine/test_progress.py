"""The progress helpers pass items through unchanged and log what they timed."""

from __future__ import annotations

import logging

from ltx_pipelines.engine.progress import progress, timed_stage


def test_progress_yields_everything_and_logs(caplog):
    with caplog.at_level(logging.INFO, logger="ltx_pipelines.engine.progress"):
        assert list(progress(iter(range(5)), desc="decode", unit="chunk", enabled=False)) == [0, 1, 2, 3, 4]
        with timed_stage("stage 1"):
            pass
    text = caplog.text
    assert "decode: 5 chunk" in text and "stage 1 done in" in text
