"""The progress helpers pass items through unchanged and log what they timed."""

from __future__ import annotations

import logging

from ltx_pipelines.io.progress import progress


def test_progress_yields_everything_and_logs(caplog):
    with caplog.at_level(logging.INFO, logger="ltx_pipelines.io.progress"):
        assert list(progress(iter(range(5)), desc="decode", unit="chunk", enabled=False)) == [0, 1, 2, 3, 4]
    text = caplog.text
    assert "decode: 5 chunk" in text
