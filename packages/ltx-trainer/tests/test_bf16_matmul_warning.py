"""The trainer's bf16-on-CPU warning follows the measured matmul choice (`ltx_core.tune`), not CPU flags."""

from __future__ import annotations

import logging

import pytest
import torch

from ltx_core.tune import KernelChoices, MachineKey
from ltx_trainer.training import build as parts


@pytest.mark.parametrize("bf16_faster", [True, False])
def test_warns_exactly_when_bf16_matmul_measured_slower(bf16_faster, monkeypatch, caplog):
    seconds = {"native": 0.5, "float32": 1.0} if bf16_faster else {"native": 8.0, "float32": 1.0}
    timed = []

    def timer(path, run):
        timed.append(path)
        return seconds[path]

    machine = MachineKey("Some CPU", ("avx2",), torch.__version__)
    monkeypatch.setattr(
        parts.KernelChoices, "load", classmethod(lambda cls: KernelChoices(machine, None, timer=timer, min_work=0))
    )
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 64), torch.nn.Linear(64, 4))
    with caplog.at_level(logging.WARNING, logger=parts.__name__):
        warned = parts.warn_if_bf16_matmul_is_slow(model, tokens=4)
    assert warned is not bf16_faster
    assert ("bf16 matmuls measured slower than float32" in caplog.text) is not bf16_faster
    assert sorted(timed) == ["float32", "native"]  # the widest Linear (16 x 64), timed both ways
