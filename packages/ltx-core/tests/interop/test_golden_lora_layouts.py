"""Parity: every LoRA file of the interop set, whatever its layout, fuses to the reference's weights.

The file names come from the `interop/lora/` folder and the strengths from `expected_fused`'s header;
expected values are `expected_fused.safetensors` (the reference's bf16 fusion of the source LoRA), and
the comparison is bit-exact, as the fixture README requires.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ltx_core.loader import LoraSpec, fuse_loras, load_state_dict, stored_float_dtypes
from ltx_core.loader.lora_layouts import LoraLayout, read_lora, resolve_kohya_name
from ltx_core.model.transformer.spec import AV_TRANSFORMER

EXPECTED = "expected_fused.safetensors"


def _source_lora(golden_dir: Path) -> Path:
    """The source LoRA (ComfyUI layout) the others and the expected weights were made from, as
    `interop/verification.json` names it."""
    verification = json.loads((golden_dir / "interop" / "verification.json").read_text())
    return golden_dir / verification["lora"]["source"]


def _lora_files(golden_dir: Path) -> list[Path]:
    folder = golden_dir / "interop" / "lora"
    files = sorted(p for p in folder.glob("*.safetensors") if p.name != EXPECTED)
    assert files, f"no LoRA files in {folder}"
    return [_source_lora(golden_dir), *files]


def _expected(golden_dir: Path) -> tuple[list[float], dict[str, torch.Tensor]]:
    path = golden_dir / "interop" / "lora" / EXPECTED
    with safe_open(str(path), framework="pt") as f:
        strengths = [float(s) for s in json.loads(f.metadata()["strengths"])]
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not a mapping
    return strengths, tensors


@pytest.mark.golden
def test_every_lora_layout_fuses_to_the_reference_weights(golden_dir, golden_checkpoint):
    checkpoint = golden_checkpoint
    weights = load_state_dict(checkpoint, AV_TRANSFORMER.ops, dtype=torch.float32)
    stored = stored_float_dtypes(checkpoint, AV_TRANSFORMER.ops)
    strengths, expected = _expected(golden_dir)
    assert strengths, "expected_fused records no strengths"
    layouts = set()
    for lora in _lora_files(golden_dir):
        layouts.add(read_lora(lora).layout)
        for strength in strengths:
            prefix = f"strength_{strength:g}."
            targets = {k[len(prefix) :]: v for k, v in expected.items() if k.startswith(prefix)}
            assert targets, f"{EXPECTED} has no tensors under {prefix!r}"
            fused = fuse_loras(weights, [LoraSpec(lora, strength)], component="transformer", stored_dtypes=stored)
            for key, want in targets.items():
                assert torch.equal(fused[key], want), f"{lora.name} at strength {strength}: {key} differs"
            untouched = [k for k in weights if k not in targets and not torch.equal(fused[k], weights[k])]
            assert not untouched, f"{lora.name}: weights changed that the LoRA does not target: {untouched[:5]}"
    # The folder covers the layouts it claims to (kohya, diffusers) besides the source's ComfyUI layout.
    assert {LoraLayout.COMFYUI, LoraLayout.DIFFUSERS, LoraLayout.KOHYA} <= layouts


@pytest.mark.golden
def test_kohya_and_diffusers_names_resolve_without_the_model(golden_dir):
    """Without the model's module names (e.g. converting a file), kohya and diffusers names still map to
    the source LoRA's module names."""
    source = read_lora(_source_lora(golden_dir))
    for lora in _lora_files(golden_dir)[1:]:
        read = read_lora(lora)
        assert set(read.modules) == set(source.modules), lora.name


@pytest.mark.golden
def test_every_released_linear_has_a_kohya_name_that_resolves_back(golden_dir):
    """kohya names read without the model (LoRA conversion) resolve for every 2-D weight of the released
    22B transformer and connectors (the key list of the golden set)."""
    keys = json.loads((golden_dir / "ltx-2.3-22b-keys.json").read_text())["keys"]
    prefix = "model.diffusion_model."
    modules = [
        k[len(prefix) : -len(".weight")]
        for k, (shape, _) in keys.items()
        if k.startswith(prefix) and len(shape) == 2 and k.endswith(".weight")
    ]
    assert modules
    wrong = [m for m in modules if resolve_kohya_name(m.replace(".", "_")) != m]
    assert not wrong, f"kohya names that do not resolve back: {wrong[:10]}"


@pytest.mark.golden
def test_loras_fuse_into_a_model_built_from_the_diffusers_folder(golden_dir, golden_interop_dir):
    """The bf16 rule rounds to the dtype the folder stores: the full build path from `interop/diffusers/`
    with each LoRA layout gives the expected fused weights too."""
    from ltx_core.loader import ModelFiles, build_model

    files = ModelFiles.from_diffusers(golden_interop_dir / "diffusers")
    strengths, expected = _expected(golden_dir)
    for lora in _lora_files(golden_dir):
        strength = strengths[-1]
        prefix = f"strength_{strength:g}."
        model = build_model(AV_TRANSFORMER, files, device="cpu", loras=[LoraSpec(lora, strength)])
        state = model.state_dict()
        for key, want in expected.items():
            if key.startswith(prefix):
                assert torch.equal(state[key[len(prefix) :]], want), f"{lora.name}: {key}"
