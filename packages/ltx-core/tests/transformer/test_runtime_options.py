"""RuntimeOptions: each flag value rejected cleanly, before any weight is read, where it cannot run."""

from __future__ import annotations

import pytest
import torch

from ltx_core.compilation import CompileConfig
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.runtime import RuntimeOptions, build_transformer


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"quantization": "int4"},
            "--quantization 'int4' is not supported; accepted: \\('fp8-cast', 'fp8-scaled-mm'\\)",
        ),
        ({"offload": "gpu"}, "--offload 'gpu' is not supported; accepted: \\('none', 'cpu', 'disk'\\)"),
        ({"attention_backend": "xformers"}, "--attention-backend 'xformers' is unknown"),
        ({"device_slots": 4}, "device_slots 4 must be between 1 and 3"),
        ({"host_slots": 0}, "host_slots 0 must be at least 1"),
    ],
)
def test_bad_values_are_named_with_the_accepted_ones(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RuntimeOptions(**kwargs)


def test_fp8_scaled_mm_on_a_cpu_names_the_device_and_the_alternative():
    with pytest.raises(ValueError, match="compute capability >= 8.9.*device 'cpu'.*fp8-cast"):
        RuntimeOptions(quantization="fp8-scaled-mm").validate("cpu")


def test_cuda_graph_compile_modes_need_resident_weights():
    options = RuntimeOptions(offload="disk", compile=CompileConfig(mode="reduce-overhead"))
    with pytest.raises(ValueError, match="cannot run with --offload cpu/disk"):
        options.validate("cpu")


def test_validation_runs_before_the_checkpoint_is_read(tmp_path):
    missing = tmp_path / "never_read.safetensors"
    with pytest.raises(ValueError, match="fp8-scaled-mm"):
        build_transformer(AV_TRANSFORMER, missing, RuntimeOptions(quantization="fp8-scaled-mm"), device="cpu")


def test_default_options_build_the_plain_model(write_checkpoint, make_inputs):
    from ltx_core.loader import build_model

    path, _ = write_checkpoint()
    ours = build_transformer(AV_TRANSFORMER, path, device="cpu", dtype=torch.float32)
    plain = build_model(AV_TRANSFORMER, path, device="cpu", dtype=torch.float32)
    assert ours.quantized_modules == ()
    video, audio = make_inputs()
    for got, want in zip(ours(video, audio), plain(video, audio)):
        assert torch.equal(got, want)


def test_cli_flag_values_map_onto_options():
    options = RuntimeOptions.from_flags("fp8-cast", "disk", ["backend=aot_eager"], "auto")
    assert options.quantization == "fp8-cast" and options.offload == "disk"
    assert options.compile == CompileConfig(backend="aot_eager") and options.attention_backend is None
    assert RuntimeOptions.from_flags(compile=[]).compile == CompileConfig()
    assert RuntimeOptions.from_flags().compile is None
