"""Telling model files apart from their safetensors header alone, so a file passed to the wrong flag
is named for what it is before anything is loaded.

- LTX single-file checkpoint: `config` metadata with a `transformer` section (plus `vae`, ...).
- Latent upsampler: a flat `config` whose `_class_name` is `LatentUpsampler`.
- LoRA: low-rank pairs in any layout `ltx_core.loader.lora_layouts` reads (`lora_A` / `lora_B`,
  peft's `.default`, kohya's `lora_down` / `lora_up`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ltx_core.loader import CheckpointError, SafetensorsHeader, read_safetensors_header

CheckpointKind = Literal["ltx_checkpoint", "upsampler", "lora", "gemma_text_encoder", "ltx_component", "unknown"]
ExpectedKind = Literal["ltx_checkpoint", "upsampler", "lora"]

_EXPECTED_DESCRIPTIONS: dict[str, str] = {
    "ltx_checkpoint": "an LTX-2 single-file model checkpoint (metadata 'config' with a 'transformer' section)",
    "upsampler": "a latent upsampler (metadata 'config' with _class_name 'LatentUpsampler')",
    "lora": "a LoRA (tensors named '<module>.lora_A.weight' / '.lora_B.weight', or kohya's '.lora_down.weight')",
}
_FLAG_HINTS: dict[str, str] = {
    "ltx_checkpoint": "--checkpoint-path / --distilled-checkpoint-path",
    "upsampler": "--spatial-upsampler-path",
    "lora": "--lora / --distilled-lora",
}


@dataclass(frozen=True)
class CheckpointKindInfo:
    kind: CheckpointKind
    description: str
    """What the file is, in words, for error messages."""
    header: SafetensorsHeader


_DOWN_FACTOR_SUFFIXES = (".lora_A.weight", ".lora_A.default.weight", ".lora_down.weight")


def _lora_pairs(header: SafetensorsHeader) -> int:
    return sum(1 for name in header.tensors if name.endswith(_DOWN_FACTOR_SUFFIXES))


def _describe_upsampler(config: dict) -> str:
    kinds = [k for k in ("spatial", "temporal") if config.get(f"{k}_upsample")]
    scale = config.get("spatial_scale") if config.get("spatial_upsample") else None
    detail = " + ".join(kinds) or "unknown axis"
    if scale is not None:
        detail += f" x{scale:g}" if isinstance(scale, (int, float)) else f" x{scale}"
    elif config.get("temporal_upsample"):
        detail += " x2"
    return f"a latent upsampler ({detail})"


def detect_checkpoint_kind(path: str | Path) -> CheckpointKindInfo:
    """Classify a safetensors file by its metadata and key names (only the header is read)."""
    header = read_safetensors_header(path)
    config = header.metadata.get("config")
    version = header.metadata.get("model_version")
    version_text = f", model_version {version}" if version is not None else ""
    if isinstance(config, dict):
        if isinstance(config.get("transformer"), dict):
            sections = ", ".join(sorted(k for k, v in config.items() if isinstance(v, dict)))
            return CheckpointKindInfo(
                "ltx_checkpoint", f"an LTX-2 single-file model checkpoint (sections: {sections}{version_text})", header
            )
        if config.get("_class_name") == "LatentUpsampler":
            return CheckpointKindInfo("upsampler", _describe_upsampler(config), header)
        sections = sorted(k for k, v in config.items() if isinstance(v, dict))
        if sections:
            return CheckpointKindInfo(
                "ltx_component",
                f"an LTX component file with config sections {sections} but no 'transformer'{version_text}",
                header,
            )
    pairs = _lora_pairs(header)
    if pairs:
        return CheckpointKindInfo("lora", f"a LoRA ({pairs} low-rank pairs)", header)
    if "gemma_config" in header.metadata:
        return CheckpointKindInfo("gemma_text_encoder", "a single-file Gemma text encoder", header)
    if any(name.startswith("model.diffusion_model.") for name in header.tensors):
        return CheckpointKindInfo(
            "unknown", "transformer weights without the 'config' metadata the model is built from", header
        )
    meta_keys = sorted(header.metadata)
    return CheckpointKindInfo(
        "unknown", f"a safetensors file with {len(header.tensors)} tensors and metadata keys {meta_keys}", header
    )


def check_checkpoint_kind(path: str | Path, expected: ExpectedKind) -> CheckpointKindInfo:
    """Raise CheckpointError unless `path` is the `expected` kind; the message says what the file is instead."""
    if expected not in _EXPECTED_DESCRIPTIONS:
        raise ValueError(f"unknown expected kind {expected!r}; accepted: {sorted(_EXPECTED_DESCRIPTIONS)}")
    info = detect_checkpoint_kind(path)
    if info.kind != expected:
        hint = _FLAG_HINTS.get(info.kind)
        where = f"; it belongs to {hint}" if hint else ""
        raise CheckpointError(
            f"{str(info.header.path)!r} is {info.description}, not {_EXPECTED_DESCRIPTIONS[expected]}{where}"
        )
    return info
