"""Kernel paths chosen by timing (`ltx_core.tune`): the choice with injected timings (nothing is
really timed here), the per-machine cache file, forcing, and the layers that follow the decisions."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from ltx_core.model.transformer import attention_backends
from ltx_core.model.video_vae.layers import CausalConv3d, cpu_compute_dtype
from ltx_core.tune import (
    CLOSE_CALL,
    KERNEL_PATHS,
    KernelChoices,
    MachineKey,
    OpKey,
    attach,
    choose_fastest,
    owned_choices,
    parse_forced,
    this_machine,
)

MACHINE_A = MachineKey("Some CPU", ("avx2", "avx512_bf16", "fma"), "2.15.0")
KEY = OpKey("conv3d-f32", "float32", "8x8.px64")


class FakeTimer:
    """Seconds per path name, and the paths it was asked to time (no call is run or timed)."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.asked: list[str] = []

    def __call__(self, path: str, run) -> float:
        self.asked.append(path)
        if self.seconds[path] is None:
            raise RuntimeError(f"no kernel for {path}")
        return self.seconds[path]


def _never_timed(path: str, run) -> float:
    raise AssertionError(f"{path} was timed")


def _candidates(*names: str) -> dict:
    return dict.fromkeys(names, lambda: None)


def test_fastest_wins_unless_within_the_margin_of_the_default():
    assert choose_fastest({"direct": 1.0, "winograd": 0.5}, "direct") == "winograd"
    assert choose_fastest({"direct": 1.0, "winograd": 0.97}, "direct") == "direct"  # noise: keep the default
    assert choose_fastest({"merged": 0.2, "winograd": 0.5}, "direct") == "merged"  # default not timed
    assert choose_fastest({}, "direct") == "direct"


def test_choice_is_timed_once_then_remembered():
    timer = FakeTimer({"direct": 2.0, "merged": 1.5, "winograd": 0.5})
    choices = KernelChoices(MACHINE_A, None, timer=timer, min_work=0)
    assert choices.choose(KEY, _candidates("direct", "merged", "winograd"), default="direct") == "winograd"
    assert choices.choose(KEY, _candidates("direct", "merged", "winograd"), default="direct") == "winograd"
    assert timer.asked == ["direct", "merged", "winograd"]
    assert choices.decisions[str(KEY)].seconds == {"direct": 2.0, "merged": 1.5, "winograd": 0.5}


def test_a_close_call_is_timed_again():
    """Paths timed within `CLOSE_CALL` of the fastest are not told apart by one timing: they run again
    and each keeps its least time (a burst of another process during one first timing is undone)."""
    times = {"direct": [1.0, 0.7], "winograd": [0.9, 0.9], "merged": [3.0]}
    asked: list[str] = []

    def timer(path: str, run) -> float:
        asked.append(path)
        return times[path].pop(0)

    choices = KernelChoices(MACHINE_A, None, timer=timer, min_work=0)
    assert choices.choose(KEY, _candidates("direct", "merged", "winograd"), default="direct") == "direct"
    assert asked == ["direct", "merged", "winograd", "direct", "winograd"]
    assert choices.decisions[str(KEY)].seconds == {"direct": 0.7, "merged": 3.0, "winograd": 0.9}
    clear = FakeTimer({"direct": 1.0, "winograd": 1.0 / (1 + CLOSE_CALL) - 0.01})
    choices = KernelChoices(MACHINE_A, None, timer=clear, min_work=0)
    assert choices.choose(KEY, _candidates("direct", "winograd"), default="direct") == "winograd"
    assert clear.asked == ["direct", "winograd"]  # a clear win is not timed twice


def test_a_kernel_that_fails_is_no_candidate_and_is_not_timed_again():
    timer = FakeTimer({"flash": None, "math": 3.0})
    choices = KernelChoices(MACHINE_A, None, timer=timer, min_work=0)
    key = OpKey("sdpa", "float32", "x")
    assert choices.choose(key, _candidates("flash", "math"), default="flash") == "math"
    assert choices.choose(key, _candidates("flash", "math"), default="flash") == "math"
    assert timer.asked == ["flash", "math"]


def test_a_decision_is_timed_again_when_a_path_it_never_weighed_is_offered(tmp_path):
    """A cache written before a path existed (or for inputs a path did not apply to) does not keep the
    new path from being timed: the decision is made again among all candidates and saved."""
    cache = tmp_path / "kernels.json"
    old = KernelChoices(MACHINE_A, cache, timer=FakeTimer({"direct": 2.0, "winograd": 1.0}), min_work=0)
    assert old.choose(KEY, _candidates("direct", "winograd"), default="direct") == "winograd"
    timer = FakeTimer({"direct": 2.0, "winograd": 1.0, "gemm": 0.5})
    new = KernelChoices(MACHINE_A, cache, timer=timer, min_work=0)
    assert new.choose(KEY, _candidates("direct", "winograd"), default="direct") == "winograd"  # nothing new
    assert timer.asked == []
    assert new.choose(KEY, _candidates("direct", "winograd", "gemm"), default="direct") == "gemm"
    assert sorted(timer.asked) == ["direct", "gemm", "winograd"]
    assert KernelChoices(MACHINE_A, cache, timer=_never_timed).decisions[str(KEY)].path == "gemm"


def test_small_work_takes_the_default_untimed():
    choices = KernelChoices(MACHINE_A, None, timer=_never_timed, min_work=1e6)
    assert choices.choose(KEY, _candidates("direct", "winograd"), default="direct", work=1e5) == "direct"
    assert not choices.decisions


def test_forced_path_wins_untimed_and_falls_back_where_it_cannot_apply(caplog):
    choices = KernelChoices(MACHINE_A, None, forced={"conv3d-f32": "winograd"}, timer=_never_timed, min_work=0)
    with caplog.at_level(logging.INFO, logger="ltx_core.tune.choices"):
        assert choices.choose(KEY, _candidates("direct", "winograd"), default="direct") == "winograd"
        other = OpKey("conv3d-f32", "float32", "1x1 layer")
        assert choices.choose(other, _candidates("direct", "merged"), default="direct") == "direct"
    assert f"kernel path {KEY} -> winograd (forced)" in caplog.text


def test_forcing_spec_is_parsed_and_bad_names_are_refused():
    assert parse_forced("winograd") == {"conv3d-f32": "winograd"}
    assert parse_forced("sdpa=math, vae-compute=float32") == {"sdpa": "math", "vae-compute": "float32"}
    assert parse_forced("") == {}
    with pytest.raises(ValueError, match=r"path 'fast' is unknown; accepted: .*winograd"):
        parse_forced("fast")
    with pytest.raises(ValueError, match=r"item 'sdpa=winograd' names no kernel path; accepted: .*sdpa=flash\|math"):
        parse_forced("sdpa=winograd")


def test_cache_round_trip_and_another_machine_or_torch_times_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LTX_KERNEL_TUNING", "1")
    timer = FakeTimer({"direct": 2.0, "winograd": 0.5})
    first = KernelChoices.load(tmp_path, machine=MACHINE_A, forced={}, timer=timer)
    assert first.choose(KEY, _candidates("direct", "winograd"), default="direct") == "winograd"
    files = list(tmp_path.iterdir())
    assert [f.name for f in files] == [f"{MACHINE_A.fingerprint()}.json"]  # no temporary file left
    # A new process on the same machine reads the decision instead of timing.
    again = KernelChoices.load(tmp_path, machine=MACHINE_A, forced={}, timer=_never_timed)
    assert again.choose(KEY, _candidates("direct", "winograd"), default="direct") == "winograd"
    # Another CPU (no avx512_bf16) or another torch: its own decisions, timed again.
    for other in (
        MachineKey("Some CPU", ("avx2", "fma"), "2.15.0"),
        MachineKey("Some CPU", ("avx2", "avx512_bf16", "fma"), "2.16.0"),
    ):
        retimed = FakeTimer({"direct": 0.5, "winograd": 2.0})
        there = KernelChoices.load(tmp_path, machine=other, forced={}, timer=retimed)
        assert there.choose(KEY, _candidates("direct", "winograd"), default="direct") == "direct"
        assert retimed.asked == ["direct", "winograd"]
    # A file renamed onto this machine's name but made elsewhere is not trusted.
    elsewhere = tmp_path / f"{MachineKey('Some CPU', ('avx2', 'fma'), '2.15.0').fingerprint()}.json"
    elsewhere.replace(tmp_path / f"{MACHINE_A.fingerprint()}.json")
    assert KernelChoices.load(tmp_path, machine=MACHINE_A, forced={}).decisions == {}


def test_unreadable_cache_file_is_timed_again(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("LTX_KERNEL_TUNING", "1")
    (tmp_path / f"{MACHINE_A.fingerprint()}.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="ltx_core.tune.choices"):
        choices = KernelChoices.load(tmp_path, machine=MACHINE_A, forced={})
    assert choices.decisions == {}
    assert "unreadable" in caplog.text


def test_environment_forces_paths_and_turns_timing_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LTX_KERNEL_PATH", "math")
    monkeypatch.setenv("LTX_KERNEL_TUNING", "0")
    choices = KernelChoices.load(tmp_path)
    assert choices.forced == {"sdpa": "math"}
    assert choices.cache_file is None
    assert choices.choose(KEY, _candidates("direct", "winograd"), default="direct") == "direct"
    monkeypatch.setenv("LTX_KERNEL_PATH", "fastest")
    with pytest.raises(ValueError, match="LTX_KERNEL_PATH path 'fastest' is unknown"):
        KernelChoices.load(tmp_path)


def test_this_machine_names_the_cpu_and_torch():
    machine = this_machine()
    assert machine.torch_version == torch.__version__
    assert machine.cpu_model
    assert "torch" in machine.capability()


# -- the layers follow the decisions ---------------------------------------------------------------


@pytest.mark.parametrize("fastest", KERNEL_PATHS["conv3d-f32"])
def test_causal_conv_takes_the_path_timed_fastest(fastest, conv_paths_taken):
    taken = conv_paths_taken
    seconds = {path: 1.0 for path in KERNEL_PATHS["conv3d-f32"]} | {fastest: 0.1}
    timer = FakeTimer(seconds)
    conv = CausalConv3d(8, 4)
    conv.use_kernel_choices(KernelChoices(MACHINE_A, None, timer=timer, min_work=0))
    x = torch.randn(1, 8, 3, 6, 6)
    with torch.no_grad():
        want = conv.conv(torch.cat([x[:, :, :1]] * 2 + [x], dim=2))
        got = conv(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert taken == ([] if fastest == "direct" else [fastest])
    assert sorted(timer.asked) == sorted(KERNEL_PATHS["conv3d-f32"])


def test_only_paths_autograd_can_follow_are_candidates_under_autograd():
    timer = FakeTimer({"direct": 1.0, "merged": 2.0, "channels-last": 2.0, "winograd": 0.1, "time-winograd": 0.1,
                       "gemm": 0.1})  # fmt: skip
    conv = CausalConv3d(8, 4)
    conv.use_kernel_choices(KernelChoices(MACHINE_A, None, timer=timer, min_work=0))
    conv(torch.randn(1, 8, 3, 6, 6, requires_grad=True)).sum().backward()
    assert sorted(timer.asked) == ["channels-last", "direct", "merged"]


@pytest.mark.parametrize("fastest, dtype", [("native", torch.bfloat16), ("float32", torch.float32)])
def test_half_vae_keeps_activations_in_the_dtype_timed_faster(fastest, dtype):
    conv = CausalConv3d(8, 8).to(torch.bfloat16)
    seconds = {"native": 1.0, "float32": 1.0, fastest: 0.1}
    asked = []

    def timer(path: str, run) -> float:
        asked.append(path)
        run()  # tiny: runs the candidate once, untimed
        return seconds[path]

    choices = KernelChoices(MACHINE_A, None, timer=timer, min_work=0)
    assert cpu_compute_dtype(conv, choices, 8, 8) == dtype
    assert sorted(asked) == ["float32", "native"]
    # The float32 weight copy the timing made stays only where float32 runs.
    assert ("_float_cache" in conv.conv.__dict__) is (fastest == "float32")
    assert cpu_compute_dtype(conv, None, 8, 8) == torch.bfloat16  # untuned: the weights' dtype


def _tiny_attention_inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 6, 16, generator=g) for _ in range(3)]


@pytest.mark.parametrize("fastest", ["flash", "math"])
def test_cpu_sdpa_runs_the_kernel_timed_fastest(fastest, monkeypatch):
    kernels = []
    real = attention_backends.sdpa_kernel
    monkeypatch.setattr(attention_backends, "sdpa_kernel", lambda backends: kernels.append(backends) or real(backends))
    timer = FakeTimer({"flash": 1.0, "math": 1.0, fastest: 0.1})
    fn = attention_backends.attention_function(None, KernelChoices(MACHINE_A, None, timer=timer, min_work=0))
    q, k, v = _tiny_attention_inputs()
    got = fn(q, k, v, 2, None)
    torch.testing.assert_close(got, attention_backends.sdpa_attention(q, k, v, 2))
    chosen = attention_backends._CPU_SDPA_KERNELS[fastest]
    assert kernels[-1] == chosen
    assert sorted(timer.asked) == ["flash", "math"]


def test_model_reads_this_machines_decisions_from_the_user_cache_on_first_cpu_call(tmp_path, monkeypatch):
    """A transformer layer takes the path a previous process saved for this machine (nothing timed)."""
    monkeypatch.setenv("LTX_KERNEL_TUNING", "1")
    monkeypatch.delenv("LTX_KERNEL_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    machine = this_machine()
    key = OpKey("sdpa", "float32", "h2.d8.q4.k4.plain")
    saved = KernelChoices.load(machine=machine, forced={}, timer=FakeTimer({"flash": 1.0, "math": 0.1}))
    saved.min_work = 0
    assert saved.choose(key, _candidates("flash", "math"), default="flash") == "math"
    assert json.loads(saved.cache_file.read_text())["decisions"][str(key)]["path"] == "math"
    assert saved.cache_file.parent == tmp_path / "ltx" / "kernels"

    model = torch.nn.Module()
    model.kernel_choices = None
    model.use_kernel_choices = lambda c: setattr(model, "kernel_choices", c)
    choices = owned_choices(model, torch.device("cpu"))
    assert choices is model.kernel_choices and choices.timer is not _never_timed
    choices.timer = _never_timed
    q, k, v = _tiny_attention_inputs()
    kernels = []
    real = attention_backends.sdpa_kernel
    monkeypatch.setattr(attention_backends, "sdpa_kernel", lambda backends: kernels.append(backends) or real(backends))
    attention_backends.attend(q[:, :4], k[:, :4], v[:, :4], 2, choices=choices)
    assert kernels == [attention_backends._CPU_SDPA_KERNELS["math"]]
    attach(model, None)


# -- python -m ltx_core.tune -------------------------------------------------------------------------

_TINY_CONFIG = {
    "vae": {
        "latent_channels": 8,
        "out_channels": 3,
        "patch_size": 4,
        "norm_layer": "pixel_norm",
        "decoder_base_channels": 4,
        "causal_decoder": False,
        "spatial_padding_mode": "zeros",
        "timestep_conditioning": False,
        "decoder_blocks": [["res_x", {"num_layers": 1}], ["compress_all", {"multiplier": 2}]],
    },
    "transformer": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "audio_num_attention_heads": 2,
        "audio_attention_head_dim": 4,
        "cross_attention_dim": 16,
        "audio_cross_attention_dim": 8,
    },
}


def test_tune_command_times_every_decoder_layer_and_attention_shape(tmp_path, monkeypatch, capsys):
    from ltx_core.tune import __main__ as tune_main
    from ltx_core.tune import norm

    timer = FakeTimer({"direct": 1.0, "merged": 2.0, "winograd": 0.5, "native": 1.0, "float32": 2.0,
                       "time-winograd": 0.5, "gemm": 3.0, "channels-last": 3.0, "flash": 1.0, "math": 2.0,
                       "composite": 2.0, "mirrored": 1.0})  # fmt: skip
    monkeypatch.setattr(norm, "MIN_TUNED_ELEMENTS", 0)  # the tiny widths below are timed as real ones would be
    monkeypatch.setattr(
        tune_main.KernelChoices, "load", classmethod(lambda cls: cls(MACHINE_A, None, timer=timer, min_work=0))
    )
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"config": _TINY_CONFIG}))
    assert tune_main.main([str(config), "--dtypes", "bf16", "fp32", "--latent", "2", "2", "2", "--untiled",
                           "--video-tokens", "16", "--text-tokens", "8"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "CPU Some CPU: has avx2 fma avx512_bf16" in out
    assert "vae-compute/bfloat16/" in out and "-> native" in out  # bf16 decoder, native timed faster
    assert "conv3d-half/bfloat16/" in out and "-> time-winograd" in out  # its native bf16 layers
    assert "conv3d-f32/float32/" in out and "-> winograd" in out  # float32 decoder layers
    assert "gemm" in timer.asked  # a candidate over these small frames, timed slower here
    assert "sdpa/float32/h2.d8.q16.k16.plain -> flash" in out
    assert "sdpa/bfloat16/h2.d8.q16.k8.masked -> flash" in out
    assert "rms-norm/bfloat16/d16.t16 -> mirrored" in out and "rms-norm/float32/d8.t2 -> mirrored" in out


def test_tune_command_refuses_a_missing_config(tmp_path):
    from ltx_core.tune import __main__ as tune_main

    with pytest.raises(SystemExit, match="is not a file"):
        tune_main.main([str(tmp_path / "nope.json")])


@pytest.mark.parametrize("fastest", ["native", "float32"])
def test_matmul_path_is_the_one_timed_faster(fastest):
    from ltx_core.tune.matmul import matmul_path

    timer = FakeTimer({"native": 1.0, "float32": 1.0, fastest: 0.1})
    choices = KernelChoices(MACHINE_A, None, timer=timer, min_work=0)
    assert matmul_path(choices, 16, 32, 8, torch.bfloat16) == fastest
    assert list(choices.decisions) == ["matmul/bfloat16/16x32.t8"]


def test_a_checkpointed_training_step_is_not_timed_inside_its_graph():
    """Timing SDPA inside a gradient-checkpointed block's forward recorded the candidates' work in the step's
    graph; the recompute, finding the decision made, saved other tensors and autograd refused the backward
    (or the process crashed). Training takes the default (or a decision made earlier), untimed."""
    from torch.utils.checkpoint import checkpoint

    from ltx_core.model.transformer.attention_backends import sdpa_attention

    timed: list[str] = []

    def timer(path, run):
        timed.append(path)
        run()
        return 1.0 if path == "math" else 2.0

    choices = KernelChoices(MACHINE_A, None, timer=timer, min_work=0)
    q, k, v = (torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(i), requires_grad=True) for i in range(3))
    loss = checkpoint(lambda a, b, c: sdpa_attention(a, b, c, 2, choices=choices).square().sum(), q, k, v,
                      use_reentrant=False)  # fmt: skip
    loss.backward()
    assert timed == [] and q.grad is not None
    with torch.no_grad():  # inference of the same shapes is timed, and training then uses that decision
        sdpa_attention(q, k, v, 2, choices=choices)
    assert sorted(timed) == ["flash", "math"]
