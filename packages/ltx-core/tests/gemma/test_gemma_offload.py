"""Gemma with its weights offloaded (host RAM or disk, each layer brought in for its forward) encodes
exactly as the resident model, and gives its temporary files back on release."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx_core.text_encoders.gemma import GemmaTextEncoder

PROMPTS = ["A red fox trots across a snowy field.", "blurry, low quality"]


@pytest.fixture(scope="module")
def resident_states(tiny_gemma_dir: Path):
    with GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu") as gemma:
        return gemma.encode(PROMPTS)


@pytest.mark.parametrize("offload", ["cpu", "disk"])
def test_offloaded_gemma_encodes_exactly_as_the_resident_one(tiny_gemma_dir, resident_states, offload):
    gemma = GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu", offload=offload)
    offload_dir = gemma._offload_dir
    try:
        states = gemma.encode(PROMPTS)
    finally:
        gemma.release()
    assert len(states.hidden_states) == len(resident_states.hidden_states)
    for got, want in zip(states.hidden_states, resident_states.hidden_states):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert torch.equal(states.attention_mask, resident_states.attention_mask)
    if offload == "disk":
        assert offload_dir is not None and not Path(offload_dir).exists()  # removed on release


def test_disk_offload_keeps_no_weights_in_the_module(tiny_gemma_dir):
    gemma = GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.float32, device="cpu", offload="disk")
    try:
        devices = {p.device.type for p in gemma.model.parameters()}
        assert devices == {"meta"}  # the weights live in the offload folder, not in the module
        assert any(Path(gemma._offload_dir).iterdir())
    finally:
        gemma.release()


def test_unknown_offload_is_refused(tiny_gemma_dir):
    with pytest.raises(ValueError, match="'gpu' is not supported; accepted"):
        GemmaTextEncoder.from_folder(tiny_gemma_dir, offload="gpu")
