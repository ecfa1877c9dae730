"""8-bit Gemma (bitsandbytes LLM.int8()): refused with a clear reason where it cannot run (no CUDA, no
bitsandbytes) before any file is read; on CUDA with bitsandbytes, every Linear but the vocabulary head is
an 8-bit layer and the hidden states stay close to the bf16 encoder's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from ltx_core.text_encoders.gemma import GemmaTextEncoder, eight_bit
from ltx_core.text_encoders.gemma.eight_bit import Gemma8bitUnavailable, require_gemma_8bit

PROMPTS = ["A red fox trots across a snowy field.", "blurry, low quality"]
HAS_BNB = importlib.util.find_spec("bitsandbytes") is not None


def test_8bit_gemma_on_the_cpu_is_refused_before_the_folder_is_read(tmp_path):
    missing_folder = tmp_path / "no-gemma-here"
    with pytest.raises(Gemma8bitUnavailable, match=r"load_in_8bit: an 8-bit Gemma text encoder needs a CUDA device"):
        GemmaTextEncoder.from_folder(missing_folder, device="cpu", load_in_8bit=True)


def test_the_refusal_names_the_users_setting_and_every_missing_part(monkeypatch):
    monkeypatch.setattr(eight_bit, "bitsandbytes_installed", lambda: False)
    with pytest.raises(ValueError) as info:
        require_gemma_8bit(torch.device("cpu"), "--load-text-encoder-in-8bit")
    message = str(info.value)
    assert message.startswith("--load-text-encoder-in-8bit:")
    assert "CUDA device (this run uses cpu)" in message and "bitsandbytes" in message


def test_cuda_without_bitsandbytes_is_refused(monkeypatch):
    monkeypatch.setattr(eight_bit, "bitsandbytes_installed", lambda: False)
    reason = eight_bit.gemma_8bit_unavailable(torch.device("cuda"))
    assert reason is not None and "bitsandbytes" in reason and "CUDA" not in reason


def test_the_quantization_config_keeps_the_head_and_uses_the_llm_int8_threshold():
    config = eight_bit.gemma_8bit_config()
    assert config.load_in_8bit and not config.load_in_4bit
    assert config.llm_int8_threshold == 6.0
    assert config.llm_int8_skip_modules == ["lm_head"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or not HAS_BNB, reason="needs CUDA and bitsandbytes")
def test_8bit_gemma_quantizes_every_linear_but_the_head_and_encodes_close_to_bf16(tiny_gemma_dir: Path):
    import bitsandbytes as bnb

    with GemmaTextEncoder.from_folder(tiny_gemma_dir, dtype=torch.bfloat16, device="cuda", max_length=128) as ref:
        want = ref.encode(PROMPTS)
    gemma = GemmaTextEncoder.from_folder(
        tiny_gemma_dir, dtype=torch.bfloat16, device="cuda", max_length=128, load_in_8bit=True
    )
    linears = {n: m for n, m in gemma.model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert type(linears["lm_head"]) is torch.nn.Linear
    eight = [n for n, m in linears.items() if isinstance(m, bnb.nn.Linear8bitLt)]
    assert sorted(eight) == sorted(n for n in linears if n != "lm_head")
    got = gemma.encode(PROMPTS)
    gemma.release()
    assert gemma.is_released
    assert len(got.hidden_states) == len(want.hidden_states)
    for g, w in zip(got.hidden_states[1:], want.hidden_states[1:]):
        rel = float((g.float() - w.float()).norm() / w.float().norm())
        assert rel < 0.1, rel
