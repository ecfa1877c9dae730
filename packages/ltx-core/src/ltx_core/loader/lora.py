"""Fusing LoRA deltas into a component's weights.

For each targeted weight W (module key `X.weight`) and every LoRA i that targets module `X` with a
down factor A (rank r x in) and an up factor B (out x r), in any layout `ltx_core.loader.lora_layouts`
reads (ComfyUI/ltx-trainer, bare, peft, diffusers, kohya):

    W <- W + sum_i strength_i * scale_i * (B_i @ A_i),   scale_i = alpha_i / r  (1 when the file gives no alpha)

Two numerics (`LoraFusionPrecision`):

- `weight-dtype` (the default, the reference's rule): the update is formed in the dtype the weight
  is stored in (bfloat16 for the released checkpoints) - B * strength rounded to it, the product
  with A accumulated in float32 and rounded to it, each further LoRA's product added and rounded,
  then W + delta rounded once more - and only then cast to the dtype the model runs in. These
  roundings are not noise: skipping them moves a pipeline's outputs by ~1e-2 against the reference.
- `float32`: everything accumulated in float32 from the weight as loaded, rounded once to its dtype.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltx_core.loader.diffusers_names import CONNECTOR_REFERENCE_ROOTS
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.lora_layouts import read_lora
from ltx_core.loader.lora_spec import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec
from ltx_core.loader.safetensors_header import read_metadata
from ltx_core.loader.state_dict import StateDict
from ltx_core.quantization.gguf import GGUFTensor, refuse_quantized_target

logger = logging.getLogger(__name__)

_WEIGHT = ".weight"


def lora_metadata(path: str | Path) -> dict[str, Any]:
    """The LoRA file's safetensors metadata (e.g. `reference_downscale_factor` of IC-LoRAs)."""
    return read_metadata(path)


@dataclass(frozen=True)
class _LoraPair:
    a: torch.Tensor
    b: torch.Tensor
    scale: float


def _lora_pairs(spec: LoraSpec, weight_keys: Collection[str] | None = None) -> dict[str, _LoraPair]:
    """Module weight key -> (A, B, alpha/rank) for every low-rank pair in the file.

    `weight_keys` (the component's weight keys) resolve kohya's flattened module names."""
    module_names = None if weight_keys is None else [k[: -len(_WEIGHT)] for k in weight_keys if k.endswith(_WEIGHT)]
    weights = read_lora(spec.path, module_names=module_names)
    return {name + _WEIGHT: _LoraPair(f.down, f.up, f.scale) for name, f in weights.modules.items()}


def _rounding_dtype(stored: torch.dtype | None, loaded: torch.dtype) -> torch.dtype:
    """The dtype the `weight-dtype` rule rounds to: the stored one when it is a 16/32-bit float
    (an fp8 payload is not a precision to accumulate in), else the dtype the weight was loaded in."""
    if stored is not None and stored in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        return stored
    return loaded


def check_delta_shape(
    path: str | Path, key: str, down: torch.Tensor, up: torch.Tensor, weight_shape: tuple[int, ...]
) -> None:
    """Refuse a low-rank pair whose update (up @ down: out x in) is not the shape of the weight it targets."""
    delta = (int(up.shape[0]), int(down.shape[1]))
    if delta != tuple(weight_shape):
        raise CheckpointError(
            f"LoRA {str(path)!r}: delta for {key!r} has shape {delta}, the weight has {tuple(weight_shape)}; "
            "was it made for another model?"
        )


def check_lora_fits(path: str | Path, weight_shapes: Mapping[str, tuple[int, ...]], component: str = "model") -> None:
    """Every check fusion makes, from the LoRA file's header and the model's weight shapes (read from its
    header), before anything is built: the layout of every key, the pairs and ranks, a target among the
    component's weights and the shape of each update. Nothing but the LoRA's alphas is read."""
    module_names = [k[: -len(_WEIGHT)] for k in weight_shapes if k.endswith(_WEIGHT)]
    weights = read_lora(path, module_names=module_names, header_only=True)
    targets = {name + _WEIGHT: factors for name, factors in weights.modules.items()}
    check_lora_targets(path, component, targets.keys(), weight_shapes.keys(), warn=False)
    for key, factors in targets.items():
        if key in weight_shapes:
            check_delta_shape(path, key, factors.down, factors.up, weight_shapes[key])


def check_lora_targets(
    path: str | Path, component: str, lora_keys: Collection[str], weight_keys: Collection[str], *, warn: bool = True
) -> None:
    """Refuse a LoRA none of whose factors targets a weight of `component` (made for another model);
    warn listing the keys that match nothing.

    Text-connector factors (diffusers' `connectors.*`, the single file's `*_embeddings_connector.*`) are
    read but fused nowhere, as in the reference: it fuses LoRAs into the diffusion transformer only and
    builds its text embeddings without them. They are reported as such, not as unmatched keys. `warn=False`
    only refuses (the check before building; fusion reports the unmatched keys once)."""
    unmatched = [k for k in lora_keys if k not in weight_keys]
    connector = [k for k in unmatched if k.startswith(CONNECTOR_REFERENCE_ROOTS)]
    if unmatched and len(unmatched) == len(lora_keys):
        why = (
            "; its text-connector factors are not fused (the reference fuses LoRAs into the transformer only)"
            if connector
            else "; was it made for another model?"
        )
        raise CheckpointError(f"LoRA {str(path)!r} matches no weight of the {component} (e.g. {unmatched[0]!r}){why}")
    if not warn:
        return
    if connector:
        logger.info(
            "LoRA %s: %d text-connector factors left unfused, as the reference does (it fuses LoRAs into the "
            "transformer only)", path, len(connector),
        )  # fmt: skip
    others = [k for k in unmatched if not k.startswith(CONNECTOR_REFERENCE_ROOTS)]
    if others:
        more = f" and {len(others) - 20} more" if len(others) > 20 else ""
        logger.warning(
            "LoRA %s: %d keys match no weight of the %s: %s%s",
            path,
            len(others),
            component,
            ", ".join(others[:20]),
            more,
        )


def _add_float32_delta(
    deltas: dict[str, torch.Tensor], key: str, pair: _LoraPair, factor: float, device: torch.device | str
) -> None:
    """The `float32` rule: every product accumulated in float32, scaled by its factor."""
    a = pair.a.to(device, torch.float32)
    b = pair.b.to(device, torch.float32)
    if key in deltas:
        deltas[key].addmm_(b, a, alpha=factor)
    else:
        deltas[key] = torch.mm(b, a).mul_(factor)


def _add_rounded_delta(
    deltas: dict[str, torch.Tensor],
    key: str,
    pair: _LoraPair,
    factor: float,
    device: torch.device | str,
    rounding: torch.dtype,
) -> None:
    """The `weight-dtype` rule: products computed in float32 from factors in `rounding`, the sum kept rounded."""
    a = pair.a.to(device, rounding).float()
    b = pair.b.to(device, rounding)
    if key in deltas:
        # A further LoRA on the same key: its scaled product is added, the sum rounded again.
        summed = deltas[key].float().addmm_(b.float(), a, alpha=factor)
        deltas[key] = summed.to(rounding)
    else:
        # The first: B * strength rounded, then the product accumulated in float32 and rounded.
        deltas[key] = torch.mm((b * factor).float(), a).to(rounding)


def _fused_weight(weight: torch.Tensor, delta: torch.Tensor, precision: LoraFusionPrecision) -> torch.Tensor:
    """W + delta under `precision`'s rule, back on W's device and in W's dtype."""
    if precision is LoraFusionPrecision.FLOAT32:
        return (weight.to(delta.device, torch.float32) + delta).to(weight.device, weight.dtype)
    rounding = delta.dtype
    # Casting W to its stored dtype is exact when it was loaded wider (bfloat16 -> float32).
    base = weight.to(delta.device, rounding).float()
    return (base + delta.float()).to(rounding).to(weight.device, weight.dtype)


def fuse_loras(
    state_dict: StateDict,
    loras: Sequence[LoraSpec],
    *,
    component: str = "model",
    precision: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
    stored_dtypes: Mapping[str, torch.dtype] | None = None,
    device: torch.device | str | None = None,
) -> StateDict:
    """Return a new state dict with the LoRAs fused; `state_dict` itself is left untouched.

    `stored_dtypes` maps module keys to the dtype the checkpoint stores them in (the `weight-dtype`
    rule rounds to that dtype, whatever dtype `state_dict` was loaded in; keys it lacks use the
    loaded dtype). Raises when a LoRA matches no weight of the component (it was made for another
    model); warns listing LoRA keys that match nothing. `device` is where the products are computed.
    """
    precision = LoraFusionPrecision.parse(precision)
    active = [spec for spec in loras if spec.strength != 0.0]
    if not active:
        return state_dict
    stored_dtypes = stored_dtypes or {}
    deltas: dict[str, torch.Tensor] = {}
    for spec in active:
        pairs = _lora_pairs(spec, state_dict.keys())
        check_lora_targets(spec.path, component, pairs.keys(), state_dict.keys())
        for key, pair in pairs.items():
            if key not in state_dict:
                continue
            weight = state_dict[key]
            if isinstance(weight, GGUFTensor):
                refuse_quantized_target(key, weight.qtype.name)
            check_delta_shape(spec.path, key, pair.a, pair.b, tuple(weight.shape))
            compute_device = device if device is not None else weight.device
            factor = spec.strength * pair.scale
            if precision is LoraFusionPrecision.FLOAT32:
                _add_float32_delta(deltas, key, pair, factor, compute_device)
            else:
                rounding = _rounding_dtype(stored_dtypes.get(key), weight.dtype)
                _add_rounded_delta(deltas, key, pair, factor, compute_device, rounding)
    fused = dict(state_dict)
    for key, delta in deltas.items():
        fused[key] = _fused_weight(state_dict[key], delta, precision)
    logger.info(
        "fused %d LoRA(s) into %d weights of the %s (%s precision)",
        len(active),
        len(deltas),
        component,
        precision.value,
    )
    return fused


class LoraDeltas:
    """The low-rank pairs of several LoRAs, indexed by module weight key; one key's delta on demand.

    Used where weights are loaded tensor by tensor (block streaming, quantized builds), so that
    LoRA fusion never needs the whole state dict. Two rounding rules:

    - `torch.float32`: sum_i strength_i * scale_i * (B_i @ A_i) in float32 (as `fuse_loras`);
    - `torch.bfloat16` (the reference's bfloat16 rule): B_i * strength_i * scale_i rounded to
      bfloat16, the product with A_i accumulated in float32, the sum over LoRAs rounded once to
      bfloat16. Quantized targets always take this delta (see `ltx_core.quantization`).
    """

    def __init__(
        self, loras: Sequence[LoraSpec], *, component: str = "model", weight_keys: Collection[str] | None = None
    ) -> None:
        self.component = component
        self._pairs: dict[str, list[tuple[LoraSpec, _LoraPair]]] = {}
        self._specs = [spec for spec in loras if spec.strength != 0.0]
        for spec in self._specs:
            pairs = _lora_pairs(spec, weight_keys)
            for key, pair in pairs.items():
                self._pairs.setdefault(key, []).append((spec, pair))

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def keys(self) -> frozenset[str]:
        return frozenset(self._pairs)

    def __contains__(self, key: str) -> bool:
        return key in self._pairs

    def check_targets(self, weight_keys: Sequence[str] | frozenset[str] | set[str]) -> None:
        """Raise when a LoRA matches no weight of the component; warn listing keys that match nothing."""
        known = set(weight_keys)
        for spec in self._specs:
            mine = [k for k, entries in self._pairs.items() if any(s is spec for s, _ in entries)]
            if mine:
                check_lora_targets(spec.path, self.component, mine, known)

    def delta(
        self, key: str, shape: tuple[int, ...], *, rule: torch.dtype = torch.float32, device: torch.device | None = None
    ) -> torch.Tensor | None:
        """The summed delta for weight `key` (None when no LoRA targets it), in `rule`'s dtype."""
        entries = self._pairs.get(key)
        if not entries:
            return None
        acc: torch.Tensor | None = None
        for spec, pair in entries:
            check_delta_shape(spec.path, key, pair.a, pair.b, tuple(shape))
            factor = spec.strength * pair.scale
            if rule == torch.bfloat16:
                b = (pair.b.to(device, torch.bfloat16) * factor).float()
                a = pair.a.to(device, torch.bfloat16).float()
                product = b @ a
            else:
                product = (pair.b.to(device, torch.float32) @ pair.a.to(device, torch.float32)).mul_(factor)
            acc = product if acc is None else acc.add_(product)
        return acc.to(rule)
