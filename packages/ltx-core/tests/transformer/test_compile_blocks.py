"""Per-block torch.compile (CPU backends that need no C++ toolchain): same outputs, token axis dynamic."""

from __future__ import annotations

import pytest
import torch

from ltx_core.compilation import CompileConfig, compile_blocks, uncompile_blocks
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.runtime import RuntimeOptions, build_transformer


@pytest.mark.parametrize("backend", ["aot_eager"])  # traces through AOT autograd; no C++ toolchain needed
def test_compiled_blocks_give_the_eager_outputs_for_two_token_counts(make_model, make_inputs, backend):
    torch._dynamo.reset()
    model = make_model()
    eager = [model(*make_inputs(video_tokens=n, audio_tokens=n // 2)) for n in (12, 20)]
    compile_blocks(model.transformer_blocks, CompileConfig(backend=backend))
    assert all(getattr(b, "_ltx_compiled", False) for b in model.transformer_blocks)
    assert set(model.state_dict()) == set(make_model().state_dict()), "compiling must not rename parameters"
    compiled = [model(*make_inputs(video_tokens=n, audio_tokens=n // 2)) for n in (12, 20)]
    for got_pair, want_pair in zip(compiled, eager):
        for got, want in zip(got_pair, want_pair):
            assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    uncompile_blocks(model.transformer_blocks)
    assert "forward" not in model.transformer_blocks[0].__dict__


def test_compile_applies_through_runtime_options_with_streaming(write_checkpoint, make_inputs):
    torch._dynamo.reset()
    path, _ = write_checkpoint()
    options = RuntimeOptions(offload="disk", compile=CompileConfig(backend="eager"))
    model = build_transformer(AV_TRANSFORMER, path, options, device="cpu", dtype=torch.float32)
    plain = build_transformer(AV_TRANSFORMER, path, device="cpu", dtype=torch.float32)
    video, audio = make_inputs()
    for got, want in zip(model(video, audio), plain(video, audio)):
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-6)
    model.block_streamer.close()


def test_key_value_items_parse_into_a_config():
    config = CompileConfig.from_key_values(
        ["backend=aot_eager", "fullgraph=true", "dynamic=false", "dynamo.cache_size_limit=64", "seq_dim_dynamic=false"]
    )
    assert config.backend == "aot_eager" and config.fullgraph is True and config.dynamic is False
    assert config.dynamo_config["cache_size_limit"] == 64
    assert not config.seq_dim_dynamic
    assert CompileConfig.from_key_values(["inductor.max_autotune=true"]).inductor_config == {"max_autotune": True}


@pytest.mark.parametrize(
    "items, message",
    [
        (["mode"], "not KEY=VALUE"),
        (["speed=11"], "unknown --compile key 'speed'"),
        (["mode=fastest"], "compile mode 'fastest'"),
        (["backend=nonesuch"], "compile backend 'nonesuch' is unknown"),
        (["mode=max-autotune", "inductor.max_autotune=true"], "either a mode or inductor options"),
    ],
)
def test_bad_compile_items_are_rejected_naming_them(items, message):
    with pytest.raises(ValueError, match=message):
        CompileConfig.from_key_values(items)
