"""The RMS norm's CPU paths (`ltx_core.tune.norm`, op kind "rms-norm"): the mirrored layer norm is the RMS
norm, the choice between them follows (injected) timings per width and size class, small or autograd-tracked
calls are never timed. (The transformer taking the path: tests/transformer/test_rms_norm_in_model.py.)"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ltx_core.tune import KernelChoices, MachineKey
from ltx_core.tune.norm import MIN_TUNED_ELEMENTS, mirrored_rms_norm, rms_norm

MACHINE = MachineKey("Some CPU", ("avx2", "avx512_bf16"), "2.15.0")


class FakeTimer:
    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds, self.asked = seconds, []

    def __call__(self, path: str, run) -> float:
        self.asked.append(path)
        return self.seconds[path]


def _never_timed(path: str, run) -> float:
    raise AssertionError(f"{path} was timed")


def test_the_mirrored_layer_norm_is_the_rms_norm_in_float32_and_bf16():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 257, 384, generator=g) * 3 + 0.5  # an offset mean: layer norm must not remove it
    weight = torch.randn(384, generator=g)
    torch.testing.assert_close(mirrored_rms_norm(x, 1e-6), F.rms_norm(x, (384,), eps=1e-6), rtol=2e-6, atol=2e-6)
    forced = KernelChoices(MACHINE, None, forced={"rms-norm": "mirrored"}, timer=_never_timed)
    torch.testing.assert_close(rms_norm(x, 1e-6, weight, forced), F.rms_norm(x, (384,), weight, 1e-6))
    xb, wb = x.bfloat16(), weight.bfloat16()
    ours, torchs = rms_norm(xb, 1e-6, wb, forced), F.rms_norm(xb, (384,), wb, 1e-6)
    assert ours.dtype == torch.bfloat16 and ours.shape == torchs.shape
    # Rounded from float32 values that differ in their last bits only: the same bf16 value but in rare ties.
    assert (ours != torchs).float().mean() < 1e-3
    torch.testing.assert_close(ours.float(), torchs.float(), rtol=2**-7, atol=2**-7)


def test_the_faster_path_is_chosen_per_width_and_size_and_remembered():
    timer = FakeTimer({"composite": 2.0, "mirrored": 1.0})
    choices = KernelChoices(MACHINE, None, timer=timer, min_work=0)
    x = torch.randn(1, MIN_TUNED_ELEMENTS // 512, 512)
    expected = F.rms_norm(x, (512,), eps=1e-6)
    torch.testing.assert_close(rms_norm(x, 1e-6, choices=choices), expected, rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(rms_norm(x, 1e-6, choices=choices), expected, rtol=2e-6, atol=2e-6)
    assert timer.asked == ["composite", "mirrored"]  # timed once for this key
    assert [d.path for d in choices.decisions.values()] == ["mirrored"]
    assert list(choices.decisions) == [f"rms-norm/float32/d512.t{MIN_TUNED_ELEMENTS // 512}"]
    slower = KernelChoices(MACHINE, None, timer=FakeTimer({"composite": 1.0, "mirrored": 2.0}), min_work=0)
    rms_norm(x, 1e-6, choices=slower)
    assert [d.path for d in slower.decisions.values()] == ["composite"]


def test_small_and_autograd_tracked_norms_are_never_timed():
    choices = KernelChoices(MACHINE, None, timer=_never_timed, min_work=0)
    rms_norm(torch.randn(4, 64, 128), 1e-6, choices=choices)  # well under MIN_TUNED_ELEMENTS
    tracked = torch.randn(1, MIN_TUNED_ELEMENTS // 256, 256, requires_grad=True)
    rms_norm(tracked, 1e-6, choices=choices).sum().backward()
    assert tracked.grad is not None and not choices.decisions
