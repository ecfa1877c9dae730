import pytest
import torch

from ltx_core.loader import (
    CheckpointError,
    ComponentSpec,
    SDOps,
    StateDictCache,
    build_model,
    free_model_weights,
    load_state_dict,
)

NET_KEYS = SDOps("tiny_net").keeping(prefix="net.").renaming_prefix("net.")


@pytest.fixture
def spec(tiny_configurator_fn):
    return ComponentSpec("tiny net", NET_KEYS, tiny_configurator_fn, config_section="tiny")


def test_build_loads_exact_weights_in_requested_dtype(spec, tiny_checkpoint):
    path, weights = tiny_checkpoint
    model = build_model(spec, path, dtype=torch.float32, device="cpu")
    assert model.proj.weight.dtype == torch.float32
    assert torch.equal(model.proj.weight, weights["net.proj.weight"].float())
    # Integer buffers keep their dtype.
    assert model.counts.dtype == torch.int64
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())
    out = model(torch.ones(1, 4))
    assert out.shape == (1, 3)


def test_build_in_bfloat16_keeps_stored_values(spec, tiny_checkpoint):
    path, weights = tiny_checkpoint
    model = build_model(spec, path, dtype=torch.bfloat16, device="cpu")
    assert model.head.weight.dtype == torch.bfloat16
    assert torch.equal(model.head.weight, weights["net.head.weight"])


def test_state_dict_reads_only_selected_keys(tiny_checkpoint):
    path, _ = tiny_checkpoint
    sd = load_state_dict(path, NET_KEYS)
    assert set(sd) == {"proj.weight", "proj.bias", "head.weight", "counts"}


def test_missing_keys_are_listed_with_file_and_component(spec, write_safetensors):
    path = write_safetensors(
        "partial.safetensors",
        {"net.proj.weight": torch.zeros(4, 4), "net.extra.weight": torch.zeros(1)},
        {"config": {"tiny": {"width": 4, "out": 3}}},
    )
    with pytest.raises(CheckpointError) as err:
        build_model(spec, path)
    msg = str(err.value)
    assert "partial.safetensors" in msg and "tiny net" in msg
    assert "missing keys 3" in msg and "head.weight" in msg and "proj.bias" in msg
    assert "unexpected keys 1: extra.weight" in msg


def test_long_key_lists_are_cut_with_a_count(spec, write_safetensors):
    tensors = {f"net.junk{i:03d}": torch.zeros(1) for i in range(30)}
    path = write_safetensors("junk.safetensors", tensors, {"config": {"tiny": {"width": 4, "out": 3}}})
    with pytest.raises(CheckpointError, match=r"unexpected keys 30: .*and 10 more"):
        build_model(spec, path)


def test_shape_mismatch_names_key_and_shapes(spec, tiny_checkpoint, write_safetensors):
    path, weights = tiny_checkpoint
    bad = dict(weights)
    bad["net.head.weight"] = torch.zeros(5, 4)
    path = write_safetensors("bad_shape.safetensors", bad, {"config": {"tiny": {"width": 4, "out": 3}}})
    with pytest.raises(CheckpointError, match=r"'head.weight' has shape \(5, 4\), the model expects \(3, 4\)"):
        build_model(spec, path)


def test_missing_config_section_names_expected_kind(spec, write_safetensors):
    path = write_safetensors("upsampler.safetensors", {"net.proj.weight": torch.zeros(4, 4)}, {"config": {"x": 1}})
    with pytest.raises(CheckpointError, match="no 'tiny' section.*expected an LTX-2 single-file checkpoint"):
        build_model(spec, path)


def test_file_without_component_keys_is_reported(spec, write_safetensors):
    path = write_safetensors(
        "other.safetensors", {"other.w": torch.zeros(1)}, {"config": {"tiny": {"width": 4, "out": 3}}}
    )
    with pytest.raises(CheckpointError, match="holds no tiny net weights"):
        build_model(spec, path)


def test_missing_file_is_reported_before_building(spec, tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        build_model(spec, tmp_path / "absent.safetensors")


def test_non_persistent_meta_buffers_are_reported(write_safetensors, tiny_net_cls):
    class WithScratch(tiny_net_cls):
        def __init__(self):
            super().__init__()
            self.register_buffer("scratch", torch.zeros(3), persistent=False)

    spec = ComponentSpec("scratchy", NET_KEYS, lambda cfg: WithScratch())
    sd = {f"net.{k}": v for k, v in tiny_net_cls().state_dict().items()}
    path = write_safetensors("s.safetensors", sd, {"config": {}})
    with pytest.raises(CheckpointError, match="left without values.*scratch"):
        build_model(spec, path)


def test_cache_reads_a_file_once_per_rule_set_and_dtype(spec, tiny_checkpoint, monkeypatch):
    from ltx_core.loader import builder

    path, _ = tiny_checkpoint
    calls = []
    real = builder.load_files
    monkeypatch.setattr(builder, "load_files", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache = StateDictCache()
    first = build_model(spec, path, cache=cache)
    second = build_model(spec, path, cache=cache)
    assert len(calls) == 1 and len(cache) == 1
    assert torch.equal(first.proj.weight, second.proj.weight)
    build_model(spec, path, cache=cache, dtype=torch.bfloat16)
    assert len(calls) == 2
    assert cache.evict(path) == 2 and len(cache) == 0


def test_free_model_weights_releases_storage(spec, tiny_checkpoint):
    path, _ = tiny_checkpoint
    model = build_model(spec, path)
    free_model_weights(model)
    assert all(p.is_meta for p in model.parameters())
