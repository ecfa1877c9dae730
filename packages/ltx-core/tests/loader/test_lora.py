import logging

import pytest
import torch

from ltx_core.loader import (
    CheckpointError,
    ComponentSpec,
    LoraFusionPrecision,
    LoraSpec,
    SDOps,
    StateDictCache,
    build_model,
    fuse_loras,
    lora_metadata,
)

NET_KEYS = SDOps("tiny_net").keeping(prefix="net.").renaming_prefix("net.")


@pytest.fixture
def spec(tiny_configurator_fn):
    return ComponentSpec("tiny net", NET_KEYS, tiny_configurator_fn, config_section="tiny")


def _lora_tensors(rank: int, seed: int, alpha: float | None = None, target: str = "proj"):
    g = torch.Generator().manual_seed(seed)
    t = {
        f"diffusion_model.{target}.lora_A.weight": torch.randn(rank, 4, generator=g),
        f"diffusion_model.{target}.lora_B.weight": torch.randn(4 if target == "proj" else 3, rank, generator=g),
    }
    if alpha is not None:
        t[f"diffusion_model.{target}.alpha"] = torch.tensor(alpha)
    return t


def test_float32_fusion_formula_with_strengths_and_alpha(spec, tiny_checkpoint, write_safetensors):
    path, weights = tiny_checkpoint
    t1 = _lora_tensors(rank=2, seed=1)
    t2 = _lora_tensors(rank=4, seed=2, alpha=2.0)
    l1 = write_safetensors("l1.safetensors", t1, {"reference_downscale_factor": 2})
    l2 = write_safetensors("l2.safetensors", t2)
    model = build_model(
        spec, path, loras=[LoraSpec(l1, 0.5), LoraSpec(l2, -1.5)], lora_fusion=LoraFusionPrecision.FLOAT32
    )

    w = weights["net.proj.weight"].float()
    d1 = t1["diffusion_model.proj.lora_B.weight"] @ t1["diffusion_model.proj.lora_A.weight"]
    d2 = t2["diffusion_model.proj.lora_B.weight"] @ t2["diffusion_model.proj.lora_A.weight"]
    expected = w + 0.5 * 1.0 * d1 + (-1.5) * (2.0 / 4) * d2
    torch.testing.assert_close(model.proj.weight, expected, rtol=1e-6, atol=1e-6)
    # Untargeted weights are untouched.
    assert torch.equal(model.head.weight, weights["net.head.weight"].float())
    assert lora_metadata(l1)["reference_downscale_factor"] == 2


def test_fused_weight_keeps_its_dtype(spec, tiny_checkpoint, write_safetensors):
    path, _ = tiny_checkpoint
    lora = write_safetensors("l.safetensors", _lora_tensors(rank=2, seed=3))
    model = build_model(spec, path, dtype=torch.bfloat16, loras=[LoraSpec(lora, 1.0)])
    assert model.proj.weight.dtype == torch.bfloat16


def test_lora_for_another_model_is_an_error(spec, tiny_checkpoint, write_safetensors):
    path, _ = tiny_checkpoint
    foreign = write_safetensors("foreign.safetensors", _lora_tensors(rank=2, seed=4, target="unet_block"))
    with pytest.raises(CheckpointError, match="matches no weight of the tiny net.*another model"):
        build_model(spec, path, loras=[LoraSpec(foreign, 1.0)])


def test_partially_matching_lora_warns_with_keys(spec, tiny_checkpoint, write_safetensors, caplog):
    path, _ = tiny_checkpoint
    tensors = {**_lora_tensors(rank=2, seed=5), **_lora_tensors(rank=2, seed=6, target="ghost")}
    lora = write_safetensors("partial.safetensors", tensors)
    with caplog.at_level(logging.WARNING):
        build_model(spec, path, loras=[LoraSpec(lora, 1.0)])
    assert "ghost.weight" in caplog.text


def test_text_connector_factors_are_left_unfused_as_the_reference_does(
    spec, tiny_checkpoint, write_safetensors, caplog
):
    """The reference fuses LoRAs into the transformer only: connector factors change nothing, are not
    reported as unmatched, and a LoRA of connector factors only is refused saying so."""
    path, _ = tiny_checkpoint
    connector = _lora_tensors(rank=2, seed=8, target="video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q")
    plain = write_safetensors("plain.safetensors", _lora_tensors(rank=2, seed=5))
    mixed = write_safetensors("mixed.safetensors", {**_lora_tensors(rank=2, seed=5), **connector})
    with caplog.at_level(logging.INFO):
        got = build_model(spec, path, loras=[LoraSpec(mixed, 1.0)])
    assert "text-connector factors left unfused" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    want = build_model(spec, path, loras=[LoraSpec(plain, 1.0)])
    assert torch.equal(got.proj.weight, want.proj.weight)
    only = write_safetensors("only_connector.safetensors", connector)
    with pytest.raises(CheckpointError, match="text-connector factors are not fused"):
        build_model(spec, path, loras=[LoraSpec(only, 1.0)])


def test_zero_strength_lora_is_not_read(spec, tiny_checkpoint, tmp_path):
    path, weights = tiny_checkpoint
    model = build_model(spec, path, loras=[LoraSpec(tmp_path / "never_opened.safetensors", 0.0)])
    assert torch.equal(model.proj.weight, weights["net.proj.weight"].float())


def test_fusion_never_mutates_cached_clean_weights(spec, tiny_checkpoint, write_safetensors):
    path, weights = tiny_checkpoint
    lora = write_safetensors("l.safetensors", _lora_tensors(rank=2, seed=7))
    cache = StateDictCache()
    fused = build_model(spec, path, cache=cache, loras=[LoraSpec(lora, 1.0)])
    clean = build_model(spec, path, cache=cache)
    assert torch.equal(clean.proj.weight, weights["net.proj.weight"].float())
    assert not torch.equal(fused.proj.weight, clean.proj.weight)


def test_fuse_loras_rejects_rank_mismatch(write_safetensors):
    lora = write_safetensors(
        "bad.safetensors",
        {
            "diffusion_model.proj.lora_A.weight": torch.zeros(2, 4),
            "diffusion_model.proj.lora_B.weight": torch.zeros(4, 3),
        },
    )
    with pytest.raises(CheckpointError, match="rank mismatch"):
        fuse_loras({"proj.weight": torch.zeros(4, 4)}, [LoraSpec(lora)])


def _bf16_lora_tensors(seed: int) -> dict[str, torch.Tensor]:
    """A rank-8 pair stored in bfloat16 (as released LoRAs are), large enough that rounding shows."""
    g = torch.Generator().manual_seed(seed)
    return {
        "diffusion_model.proj.lora_A.weight": torch.randn(8, 4, generator=g).bfloat16(),
        "diffusion_model.proj.lora_B.weight": (0.3 * torch.randn(4, 8, generator=g)).bfloat16(),
    }


def _reference_bf16_fusion(w: torch.Tensor, pairs: list[tuple[dict[str, torch.Tensor], float]]) -> torch.Tensor:
    """The reference's rule written out step by step in bfloat16 arithmetic, as its fusion runs:
    (B * s) @ A in bfloat16 for the first LoRA, addmm_ in bfloat16 for the others, then W + delta."""
    delta = None
    for t, s in pairs:
        a, b = t["diffusion_model.proj.lora_A.weight"], t["diffusion_model.proj.lora_B.weight"]
        delta = torch.matmul(b * s, a) if delta is None else delta.addmm_(b, a, alpha=s)
    return (delta + w.bfloat16()).to(torch.bfloat16)


def test_default_fusion_rounds_in_the_stored_bfloat16_like_the_reference(spec, tiny_checkpoint, write_safetensors):
    """A float32 model from a bfloat16 file gets the weights the reference fuses in bfloat16, then cast."""
    path, weights = tiny_checkpoint
    assert weights["net.proj.weight"].dtype == torch.bfloat16
    t1, t2 = _bf16_lora_tensors(11), _bf16_lora_tensors(12)
    l1 = write_safetensors("b1.safetensors", t1)
    l2 = write_safetensors("b2.safetensors", t2)
    loras = [LoraSpec(l1, 0.5), LoraSpec(l2, 2.0)]

    model = build_model(spec, path, dtype=torch.float32, loras=loras)
    want = _reference_bf16_fusion(weights["net.proj.weight"], [(t1, 0.5), (t2, 2.0)]).float()
    assert model.proj.weight.dtype == torch.float32
    assert torch.equal(model.proj.weight, want)

    # The float32 option keeps the update unrounded: a different (measurably) set of weights.
    f32 = build_model(spec, path, dtype=torch.float32, loras=loras, lora_fusion="float32")
    w = weights["net.proj.weight"].float()
    exact = w + sum(
        s * (t["diffusion_model.proj.lora_B.weight"].float() @ t["diffusion_model.proj.lora_A.weight"].float())
        for t, s in ((t1, 0.5), (t2, 2.0))
    )
    torch.testing.assert_close(f32.proj.weight, exact, rtol=1e-6, atol=1e-6)
    assert (f32.proj.weight - model.proj.weight).abs().max() > 1e-4


def test_default_fusion_of_a_bfloat16_model_matches_the_reference_rule(spec, tiny_checkpoint, write_safetensors):
    path, weights = tiny_checkpoint
    t = _bf16_lora_tensors(13)
    lora = write_safetensors("b.safetensors", t)
    model = build_model(spec, path, dtype=torch.bfloat16, loras=[LoraSpec(lora, 0.25)])
    assert torch.equal(model.proj.weight, _reference_bf16_fusion(weights["net.proj.weight"], [(t, 0.25)]))


def test_fuse_loras_without_stored_dtypes_rounds_to_the_loaded_dtype(write_safetensors):
    t = _lora_tensors(rank=2, seed=8)
    lora = write_safetensors("l.safetensors", t)
    base = {"proj.weight": torch.zeros(4, 4, dtype=torch.bfloat16)}
    out = fuse_loras(base, [LoraSpec(lora)])
    b, a = t["diffusion_model.proj.lora_B.weight"], t["diffusion_model.proj.lora_A.weight"]
    torch.testing.assert_close(out["proj.weight"], (b.bfloat16().float() @ a.bfloat16().float()).bfloat16())
    assert torch.equal(base["proj.weight"], torch.zeros(4, 4, dtype=torch.bfloat16))


def test_unknown_fusion_precision_names_the_accepted_values(write_safetensors):
    lora = write_safetensors("l.safetensors", _lora_tensors(rank=2, seed=9))
    with pytest.raises(ValueError, match="'weight-dtype', 'float32'"):
        fuse_loras({"proj.weight": torch.zeros(4, 4)}, [LoraSpec(lora)], precision="fp16")


# ---- checks before building (headers only) and non-finite factors --------------------------------------------


def _shapes(spec, path):
    from ltx_core.loader.builder import header_weight_shapes

    return header_weight_shapes(spec, path)


def test_header_shapes_are_the_built_models(spec, tiny_checkpoint):
    path, _ = tiny_checkpoint
    model = build_model(spec, path)
    assert _shapes(spec, path) == {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_a_fitting_lora_passes_the_check_before_building(spec, tiny_checkpoint, write_safetensors):
    from ltx_core.loader.lora import check_lora_fits
    from ltx_core.loader.lora_layouts import read_lora

    path, _ = tiny_checkpoint
    tensors = _lora_tensors(rank=2, seed=1, alpha=2.0)
    tensors["diffusion_model.proj.lora_A.weight"][0, 0] = float("nan")
    lora = write_safetensors("l.safetensors", tensors)
    # Headers only: the factors' values are not read (their NaN is found when they are, for fusion).
    check_lora_fits(lora, _shapes(spec, path), "tiny net")
    header = read_lora(lora, header_only=True).modules["proj"]
    assert header.down.is_meta and header.up.shape == (4, 2) and header.alpha == 2.0
    with pytest.raises(CheckpointError, match="holds NaN"):
        read_lora(lora)


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        ({**_lora_tensors(rank=2, seed=1), "stray.bias": torch.zeros(2)}, r"key 'stray.bias' is no LoRA factor.*kohya"),
        (
            {
                "diffusion_model.proj.lora_A.weight": torch.zeros(2, 5),
                "diffusion_model.proj.lora_B.weight": torch.zeros(4, 2),
            },
            r"delta for 'proj.weight' has shape \(4, 5\), the weight has \(4, 4\)",
        ),
        (
            _lora_tensors(rank=2, seed=1, target="blocks.9.nothing"),
            r"matches no weight of the tiny net.*'blocks.9.nothing",
        ),
    ],
    ids=["stray_key", "wrong_shape", "unknown_module"],
)
def test_a_lora_that_does_not_fit_is_refused_from_headers(spec, tiny_checkpoint, write_safetensors, tensors, message):
    """What fusion would refuse after the models are built is refused from the two headers."""
    from ltx_core.loader.lora import check_lora_fits

    path, _ = tiny_checkpoint
    lora = write_safetensors("l.safetensors", tensors)
    with pytest.raises(CheckpointError, match=message):
        check_lora_fits(lora, _shapes(spec, path), "tiny net")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_lora_holding_nan_or_inf_is_refused_when_read(spec, tiny_checkpoint, write_safetensors, value):
    path, _ = tiny_checkpoint
    tensors = _lora_tensors(rank=2, seed=1)
    tensors["diffusion_model.proj.lora_B.weight"][1, 0] = value
    lora = write_safetensors("l.safetensors", tensors)
    what = "NaN" if value != value else "Inf"
    with pytest.raises(CheckpointError, match=rf"'diffusion_model.proj.lora_B.weight' holds {what} values"):
        build_model(spec, path, loras=[LoraSpec(lora, 1.0)])
