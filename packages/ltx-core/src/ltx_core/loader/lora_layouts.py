"""LoRA files in the layouts users exchange, read into (and written from) one representation.

Every layout stores, per targeted Linear, a down factor A (rank x in), an up factor B (out x rank) and
optionally an alpha; the update it means is `strength * alpha / rank * B @ A` (scale 1 without alpha).
They differ in key names only:

- `comfyui` (also ltx-trainer): `diffusion_model.<module>.lora_A.weight` / `.lora_B.weight`, alpha from
  `diffusion_model.<module>.alpha`;
- `bare`: `<module>.lora_A.weight` / `.lora_B.weight` (+ `<module>.alpha`);
- `peft`: `[base_model.model.]<module>.lora_A[.default].weight`, alpha from `adapter_config.json` beside
  the file;
- `diffusers`: `transformer.<diffusers module>.lora_A.weight` (and `connectors.<...>`), alpha from the
  header entry `lora_adapter_metadata` (`transformer.lora_alpha`, `transformer.alpha_pattern`, rsLoRA);
- `kohya`: `lora_unet_<module, dots as underscores>.lora_down.weight` / `.lora_up.weight` / `.alpha`.

`<module>` is the reference's module name (after `model.diffusion_model.`); diffusers module names are
mapped back with `ltx_core.loader.diffusers_names`. kohya flattens the dots away, so its names are
resolved against the model's module names when they are known, else against the segment names of the
LTX-2 transformer and connectors (`KOHYA_SEGMENTS`).
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from ltx_core.loader.diffusers_names import (
    CONNECTOR_REFERENCE_ROOTS,
    TEXT_PROJECTION_MODULES,
    connectors_from_diffusers,
    connectors_to_diffusers,
    transformer_from_diffusers,
    transformer_to_diffusers,
)
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.key_rules import COMFY_LORA_PREFIX
from ltx_core.loader.safetensors_header import read_safetensors_header


class LoraLayout(str, enum.Enum):
    COMFYUI = "comfyui"
    BARE = "bare"
    PEFT = "peft"
    DIFFUSERS = "diffusers"
    KOHYA = "kohya"

    @classmethod
    def parse(cls, value: LoraLayout | str) -> LoraLayout:
        try:
            return cls(value)
        except ValueError:
            accepted = ", ".join(m.value for m in cls)
            raise ValueError(f"LoRA layout {value!r} is not one of {accepted}") from None


ACCEPTED_LAYOUTS = (
    "comfyui/ltx-trainer (diffusion_model.<module>.lora_A/lora_B.weight), "
    "bare (<module>.lora_A/lora_B.weight), "
    "peft (base_model.model.<module>.lora_A[.default].weight), "
    "diffusers (transformer.<module>.lora_A/lora_B.weight, connectors.<module>...), "
    "kohya (lora_unet_<module>.lora_down/lora_up.weight + .alpha)"
)

KOHYA_PREFIX = "lora_unet_"
DIFFUSERS_PREFIXES = ("transformer.", "connectors.")
PEFT_PREFIX = "base_model.model."
DIFFUSERS_METADATA_KEY = "lora_adapter_metadata"

# Path segments of the LTX-2 transformer and connectors that contain an underscore; a kohya name is
# split on `_` and these are glued back. Numbers and underscore-free segments need no entry.
KOHYA_SEGMENTS = frozenset(
    {
        "adaln_single", "audio_adaln_single", "prompt_adaln_single", "audio_prompt_adaln_single",
        "av_ca_a2v_gate_adaln_single", "av_ca_audio_scale_shift_adaln_single",
        "av_ca_v2a_gate_adaln_single", "av_ca_video_scale_shift_adaln_single",
        "audio_attn1", "audio_attn2", "audio_ff", "audio_to_video_attn", "video_to_audio_attn",
        "patchify_proj", "audio_patchify_proj", "proj_out", "audio_proj_out",
        "caption_projection", "audio_caption_projection",
        "audio_embeddings_connector", "video_embeddings_connector", "transformer_1d_blocks",
        "transformer_blocks", "text_embedding_projection", "video_aggregate_embed", "audio_aggregate_embed",
        "aggregate_embed", "timestep_embedder", "linear_1", "linear_2",
        "to_q", "to_k", "to_v", "to_out", "to_gate_logits", "q_norm", "k_norm",
    }
)  # fmt: skip

_DOWN_SUFFIXES = (".lora_A.weight", ".lora_down.weight", ".lora_A.default.weight")
_UP_SUFFIXES = (".lora_B.weight", ".lora_up.weight", ".lora_B.default.weight")
_ALPHA_SUFFIX = ".alpha"


@dataclass(frozen=True)
class LoraFactors:
    """One targeted Linear: update = strength * scale * up @ down."""

    down: torch.Tensor  # A: (rank, in)
    up: torch.Tensor  # B: (out, rank)
    alpha: float | None = None

    @property
    def rank(self) -> int:
        return int(self.down.shape[0])

    @property
    def scale(self) -> float:
        return 1.0 if self.alpha is None else self.alpha / self.rank


@dataclass(frozen=True)
class LoraWeights:
    """A LoRA file read into reference module names (`transformer_blocks.0.attn1.to_k`, no `.weight`)."""

    source: str
    layout: LoraLayout
    modules: Mapping[str, LoraFactors]
    metadata: Mapping[str, str]


def _split_factor(key: str) -> tuple[str, str] | None:
    """(module part, 'down' | 'up' | 'alpha') of a file key, or None when it is no LoRA factor."""
    for suffix in _DOWN_SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)], "down"
    for suffix in _UP_SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)], "up"
    if key.endswith(_ALPHA_SUFFIX):
        return key[: -len(_ALPHA_SUFFIX)], "alpha"
    return None


def _key_layout(key: str) -> LoraLayout:
    if key.startswith(KOHYA_PREFIX):
        return LoraLayout.KOHYA
    if key.startswith(COMFY_LORA_PREFIX):
        return LoraLayout.COMFYUI
    if key.startswith(PEFT_PREFIX) or ".default." in key:
        return LoraLayout.PEFT
    if key.startswith(DIFFUSERS_PREFIXES):
        return LoraLayout.DIFFUSERS
    return LoraLayout.BARE


def detect_layout(keys: Collection[str], *, source: str = "") -> LoraLayout:
    """The one layout all `keys` follow; raises naming the first key that fits none (or another layout)."""
    layout: LoraLayout | None = None
    for key in sorted(keys):
        if _split_factor(key) is None:
            raise CheckpointError(
                f"LoRA {source!r}: key {key!r} is no LoRA factor of any accepted layout; accepted: {ACCEPTED_LAYOUTS}"
            )
        found = _key_layout(key)
        if layout is None:
            layout = found
        elif found is not layout:
            raise CheckpointError(
                f"LoRA {source!r}: key {key!r} does not follow the {layout.value} layout of the other keys; "
                f"accepted: {ACCEPTED_LAYOUTS}"
            )
    if layout is None:
        raise CheckpointError(f"LoRA {source!r} holds no tensors; accepted: {ACCEPTED_LAYOUTS}")
    return layout


def resolve_kohya_name(flat: str, module_names: Collection[str] | None = None) -> str:
    """The dotted module name a kohya name (`transformer_blocks_0_attn1_to_out_0`) stands for.

    With `module_names`, the one whose dots-to-underscores spelling equals `flat` (ComfyUI's rule);
    otherwise underscores become dots except inside the known `KOHYA_SEGMENTS` (longest match first)."""
    if module_names is not None:
        for name in module_names:
            if name.replace(".", "_") == flat:
                return name
    tokens = flat.split("_")
    parts: list[str] = []
    i = 0
    while i < len(tokens):
        for j in range(len(tokens), i + 1, -1):
            joined = "_".join(tokens[i:j])
            if joined in KOHYA_SEGMENTS:
                parts.append(joined)
                i = j
                break
        else:
            parts.append(tokens[i])
            i += 1
    return ".".join(parts)


def _diffusers_to_reference(name: str) -> str:
    component, _, rest = name.partition(".")
    if component == "transformer":
        return transformer_from_diffusers(rest)
    return connectors_from_diffusers(rest)


def _reference_to_diffusers(name: str) -> str:
    is_connector = name.startswith(CONNECTOR_REFERENCE_ROOTS) or any(
        name == m or name.startswith(m + ".") for m in TEXT_PROJECTION_MODULES
    )
    if is_connector:
        return "connectors." + connectors_to_diffusers(name)
    return "transformer." + transformer_to_diffusers(name)


def _peft_pattern_value(name: str, patterns: Mapping[str, Any], default: Any) -> Any:
    """peft's `alpha_pattern` / `rank_pattern` lookup: a pattern matches a module name ending with it."""
    for pattern, value in patterns.items():
        if re.fullmatch(rf"(.*\.)?(?:{pattern})", name):
            return value
    return default


@dataclass(frozen=True)
class _AdapterConfig:
    """The alpha-relevant part of a peft LoraConfig."""

    lora_alpha: float | None
    alpha_pattern: Mapping[str, Any]
    use_rslora: bool

    def alpha(self, module: str, rank: int) -> float | None:
        alpha = _peft_pattern_value(module, self.alpha_pattern, self.lora_alpha)
        if alpha is None:
            return None
        # rsLoRA scales by alpha / sqrt(rank); expressed as our alpha / rank.
        return float(alpha) * math.sqrt(rank) if self.use_rslora else float(alpha)


def _adapter_config(raw: Mapping[str, Any], prefix: str = "") -> _AdapterConfig:
    if raw.get(f"{prefix}use_dora"):
        raise CheckpointError("DoRA adapters (use_dora) are not supported; only plain LoRA factors")
    alpha = raw.get(f"{prefix}lora_alpha")
    return _AdapterConfig(
        lora_alpha=None if alpha is None else float(alpha),
        alpha_pattern=raw.get(f"{prefix}alpha_pattern") or {},
        use_rslora=bool(raw.get(f"{prefix}use_rslora")),
    )


def _diffusers_adapter_configs(metadata: Mapping[str, str], source: str) -> dict[str, _AdapterConfig]:
    text = metadata.get(DIFFUSERS_METADATA_KEY)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"LoRA {source!r}: header {DIFFUSERS_METADATA_KEY!r} is not JSON ({e})") from None
    return {c: _adapter_config(raw, f"{c}.") for c in ("transformer", "connectors") if f"{c}.lora_alpha" in raw}


def read_lora(
    path: str | Path, *, module_names: Collection[str] | None = None, header_only: bool = False
) -> LoraWeights:
    """Read a LoRA file of any accepted layout into reference module names.

    `module_names` (the model's module names, without `.weight`) resolve kohya names; without them the
    LTX-2 segment table is used. A peft file takes its alpha from `adapter_config.json` beside it.
    A factor holding NaN or Inf is refused, naming its key: fused, it would turn every output into NaN.

    `header_only`: the factors are meta tensors of the stored shapes (only the header and the alphas are
    read), so layout, pairing, ranks and target shapes are checked in milliseconds before any model is built.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise CheckpointError(f"LoRA file {source!r} does not exist")
    read_safetensors_header(path)  # an empty, truncated or foreign file: a CheckpointError naming it
    with safe_open(source, framework="pt", device="cpu") as f:
        metadata = dict(f.metadata() or {})
        if header_only:
            tensors = {
                k: f.get_tensor(k) if k.endswith(_ALPHA_SUFFIX) else _meta_like(f.get_slice(k))
                for k in f.keys()  # noqa: SIM118 - safe_open is not a mapping
            }
        else:
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not a mapping
            check_finite_factors(tensors, source=source)
    peft_config = path.parent / "adapter_config.json"
    peft_raw = json.loads(peft_config.read_text()) if peft_config.is_file() else None
    return lora_weights_from_tensors(
        tensors, metadata, source=source, module_names=module_names, peft_adapter_config=peft_raw
    )


def _meta_like(stored: Any) -> torch.Tensor:
    """A meta tensor with the shape of a stored tensor (a safetensors slice: nothing is read)."""
    return torch.empty(tuple(stored.get_shape()), device="meta")


def check_finite_factors(tensors: Mapping[str, torch.Tensor], *, source: str) -> None:
    """Refuse a LoRA with a NaN or Inf value, naming the first such key (a diverged or damaged training
    output would otherwise be fused silently and only show as a failed video encode after denoising)."""
    for key, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            what = "NaN" if bool(torch.isnan(tensor).any()) else "Inf"
            raise CheckpointError(
                f"LoRA {source!r}: {key!r} holds {what} values; the file is damaged or comes from a diverged "
                "training - fused, it would make every output NaN"
            )


def lora_weights_from_tensors(
    tensors: Mapping[str, torch.Tensor],
    metadata: Mapping[str, str] | None = None,
    *,
    source: str = "<tensors>",
    module_names: Collection[str] | None = None,
    peft_adapter_config: Mapping[str, Any] | None = None,
) -> LoraWeights:
    """`read_lora` on tensors already in memory (a file's keys and header metadata)."""
    metadata = dict(metadata or {})
    layout = detect_layout(tensors, source=source)
    diffusers_configs = _diffusers_adapter_configs(metadata, source) if layout is LoraLayout.DIFFUSERS else {}
    peft_config = (
        _adapter_config(peft_adapter_config) if layout is LoraLayout.PEFT and peft_adapter_config is not None else None
    )

    parts: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        module, role = _split_factor(key)  # type: ignore[misc]  # detect_layout checked every key
        parts.setdefault(module, {})[role] = tensor

    modules: dict[str, LoraFactors] = {}
    for file_module, factor in sorted(parts.items()):
        if "down" not in factor or "up" not in factor:
            missing = "up (lora_B / lora_up)" if "up" not in factor else "down (lora_A / lora_down)"
            raise CheckpointError(f"LoRA {source!r}: {file_module!r} has no {missing} factor")
        down, up = factor["down"], factor["up"]
        if down.ndim != 2 or up.ndim != 2 or up.shape[1] != down.shape[0]:
            raise CheckpointError(
                f"LoRA {source!r}: rank mismatch at {file_module}: down {tuple(down.shape)}, up {tuple(up.shape)}"
            )
        alpha = float(factor["alpha"]) if "alpha" in factor else None
        if layout is LoraLayout.COMFYUI:
            name = file_module[len(COMFY_LORA_PREFIX) :]
        elif layout is LoraLayout.KOHYA:
            name = resolve_kohya_name(file_module[len(KOHYA_PREFIX) :], module_names)
        elif layout is LoraLayout.PEFT:
            name = file_module.removeprefix(PEFT_PREFIX).removeprefix(COMFY_LORA_PREFIX)
            if alpha is None and peft_config is not None:
                alpha = peft_config.alpha(name, down.shape[0])
        elif layout is LoraLayout.DIFFUSERS:
            component, _, diffusers_name = file_module.partition(".")
            name = _diffusers_to_reference(file_module)
            config = diffusers_configs.get(component)
            if alpha is None and config is not None:
                alpha = config.alpha(diffusers_name, down.shape[0])
        else:
            name = file_module
        if name in modules:
            raise CheckpointError(f"LoRA {source!r}: two entries map to the module {name!r}")
        modules[name] = LoraFactors(down=down, up=up, alpha=alpha)
    return LoraWeights(source=source, layout=layout, modules=modules, metadata=metadata)


def lora_file_tensors(weights: LoraWeights, layout: LoraLayout | str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors, header metadata) writing `weights` in `layout`; the update each module means is kept.

    comfyui / bare / kohya store an alpha entry where the source has one; diffusers stores one alpha
    per file in `lora_adapter_metadata`, so a file whose modules carry different scales has them
    multiplied into the up factor instead (and no metadata alpha); peft files are written without a
    config, so scales are multiplied into the up factor too."""
    layout = LoraLayout.parse(layout)
    tensors: dict[str, torch.Tensor] = {}
    metadata = {k: v for k, v in weights.metadata.items() if k != DIFFUSERS_METADATA_KEY}
    metadata["format"] = "pt"
    alphas = {f.alpha for f in weights.modules.values()}
    ranks = {f.rank for f in weights.modules.values()}
    one_alpha = len(alphas) == 1 and len(ranks) == 1 and None not in alphas

    def baked(f: LoraFactors) -> torch.Tensor:
        if f.alpha is None:
            return f.up
        return (f.up.float() * f.scale).to(f.up.dtype)

    for name, f in weights.modules.items():
        if layout in (LoraLayout.COMFYUI, LoraLayout.BARE, LoraLayout.KOHYA):
            if layout is LoraLayout.KOHYA:
                base, down_key, up_key = KOHYA_PREFIX + name.replace(".", "_"), ".lora_down.weight", ".lora_up.weight"
            else:
                prefix = COMFY_LORA_PREFIX if layout is LoraLayout.COMFYUI else ""
                base, down_key, up_key = prefix + name, ".lora_A.weight", ".lora_B.weight"
            tensors[base + down_key] = f.down
            tensors[base + up_key] = f.up
            if f.alpha is not None:
                tensors[base + _ALPHA_SUFFIX] = torch.tensor(f.alpha, dtype=torch.float32)
        elif layout is LoraLayout.DIFFUSERS:
            base = _reference_to_diffusers(name)
            tensors[base + ".lora_A.weight"] = f.down
            tensors[base + ".lora_B.weight"] = f.up if one_alpha else baked(f)
        else:
            tensors[PEFT_PREFIX + name + ".lora_A.weight"] = f.down
            tensors[PEFT_PREFIX + name + ".lora_B.weight"] = baked(f)
    if layout is LoraLayout.DIFFUSERS and one_alpha:
        (alpha,), (rank,) = alphas, ranks
        components = sorted({k.partition(".")[0] for k in tensors})
        config: dict[str, Any] = {}
        for component in components:
            targets = sorted(
                k[len(component) + 1 : -len(".lora_A.weight")]
                for k in tensors
                if k.startswith(component + ".") and k.endswith(".lora_A.weight")
            )
            # diffusers builds a peft LoraConfig from these entries, so they must be complete enough for one.
            config.update(
                {f"{component}.r": rank, f"{component}.lora_alpha": alpha, f"{component}.target_modules": targets}
            )
        metadata[DIFFUSERS_METADATA_KEY] = json.dumps(config, sort_keys=True)
    if layout is LoraLayout.KOHYA and len(ranks) == 1:
        (rank,) = ranks
        metadata.setdefault("ss_network_dim", str(rank))
    return {k: v.contiguous() for k, v in tensors.items()}, metadata
