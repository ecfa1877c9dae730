"""Fusing LoRA deltas into a component's weights.

For each targeted weight W (module key `X.weight`) and every LoRA i that carries `X.lora_A.weight`
(rank r x in) and `X.lora_B.weight` (out x r):

    W <- W + sum_i strength_i * scale_i * (B_i @ A_i),   scale_i = alpha_i / r  (1 when no `X.alpha`)

accumulated in `fuse_dtype` (float32 unless asked otherwise) and written back in W's dtype.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.key_rules import COMFY_LORA_KEYS
from ltx_core.loader.safetensors_header import read_metadata
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.state_dict import StateDict, load_state_dict

logger = logging.getLogger(__name__)

_A_SUFFIX = ".lora_A.weight"
_B_SUFFIX = ".lora_B.weight"
_ALPHA_SUFFIX = ".alpha"


@dataclass(frozen=True)
class LoraSpec:
    """One LoRA file to fuse, at a strength, with the rules that map its keys onto module keys."""

    path: str | Path
    strength: float = 1.0
    ops: SDOps = field(default=COMFY_LORA_KEYS)


def lora_metadata(path: str | Path) -> dict[str, Any]:
    """The LoRA file's safetensors metadata (e.g. `reference_downscale_factor` of IC-LoRAs)."""
    return read_metadata(path)


@dataclass(frozen=True)
class _LoraPair:
    a: torch.Tensor
    b: torch.Tensor
    scale: float


def _lora_pairs(spec: LoraSpec) -> dict[str, _LoraPair]:
    """Module weight key -> (A, B, alpha/rank) for every low-rank pair in the file."""
    tensors = load_state_dict(spec.path, spec.ops)
    bases = {k[: -len(_A_SUFFIX)] for k in tensors if k.endswith(_A_SUFFIX)}
    pairs: dict[str, _LoraPair] = {}
    for base in sorted(bases):
        b = tensors.get(base + _B_SUFFIX)
        if b is None:
            raise CheckpointError(f"LoRA {str(spec.path)!r}: {base}{_A_SUFFIX} has no matching {base}{_B_SUFFIX}")
        a = tensors[base + _A_SUFFIX]
        rank = a.shape[0]
        if b.shape[-1] != rank:
            raise CheckpointError(
                f"LoRA {str(spec.path)!r}: rank mismatch at {base}: lora_A {tuple(a.shape)}, lora_B {tuple(b.shape)}"
            )
        alpha = tensors.get(base + _ALPHA_SUFFIX)
        scale = float(alpha) / rank if alpha is not None else 1.0
        pairs[base + ".weight"] = _LoraPair(a, b, scale)
    return pairs


def fuse_loras(
    state_dict: StateDict,
    loras: Sequence[LoraSpec],
    *,
    component: str = "model",
    fuse_dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> StateDict:
    """Return a new state dict with the LoRAs fused; `state_dict` itself is left untouched.

    Raises when a LoRA matches no weight of the component (it was made for another model); warns
    listing LoRA keys that match nothing. `device` is where the products are computed.
    """
    active = [spec for spec in loras if spec.strength != 0.0]
    if not active:
        return state_dict
    deltas: dict[str, torch.Tensor] = {}
    for spec in active:
        pairs = _lora_pairs(spec)
        if not pairs:
            raise CheckpointError(
                f"LoRA {str(spec.path)!r} holds no lora_A/lora_B pairs under its key rules ({spec.ops.name})"
            )
        unmatched = [k for k in pairs if k not in state_dict]
        if len(unmatched) == len(pairs):
            raise CheckpointError(
                f"LoRA {str(spec.path)!r} matches no weight of the {component} "
                f"(e.g. {unmatched[0]!r}); was it made for another model?"
            )
        if unmatched:
            shown = ", ".join(unmatched[:20])
            more = f" and {len(unmatched) - 20} more" if len(unmatched) > 20 else ""
            logger.warning(
                "LoRA %s: %d keys match no weight of the %s: %s%s", spec.path, len(unmatched), component, shown, more
            )
        for key, pair in pairs.items():
            if key not in state_dict:
                continue
            weight = state_dict[key]
            compute_device = device if device is not None else weight.device
            a = pair.a.to(compute_device, fuse_dtype)
            b = pair.b.to(compute_device, fuse_dtype)
            if (b.shape[0], a.shape[1]) != tuple(weight.shape):
                raise CheckpointError(
                    f"LoRA {str(spec.path)!r}: delta for {key!r} has shape {(b.shape[0], a.shape[1])}, "
                    f"the weight has {tuple(weight.shape)}"
                )
            factor = spec.strength * pair.scale
            if key in deltas:
                deltas[key].addmm_(b, a, alpha=factor)
            else:
                deltas[key] = torch.mm(b, a).mul_(factor)
    fused = dict(state_dict)
    for key, delta in deltas.items():
        weight = state_dict[key]
        fused[key] = (weight.to(delta.device, fuse_dtype) + delta).to(weight.device, weight.dtype)
    logger.info("fused %d LoRA(s) into %d weights of the %s", len(active), len(deltas), component)
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

    def __init__(self, loras: Sequence[LoraSpec], *, component: str = "model") -> None:
        self.component = component
        self._pairs: dict[str, list[tuple[LoraSpec, _LoraPair]]] = {}
        self._specs = [spec for spec in loras if spec.strength != 0.0]
        for spec in self._specs:
            pairs = _lora_pairs(spec)
            if not pairs:
                raise CheckpointError(
                    f"LoRA {str(spec.path)!r} holds no lora_A/lora_B pairs under its key rules ({spec.ops.name})"
                )
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
            unmatched = [k for k in mine if k not in known]
            if mine and len(unmatched) == len(mine):
                raise CheckpointError(
                    f"LoRA {str(spec.path)!r} matches no weight of the {self.component} "
                    f"(e.g. {unmatched[0]!r}); was it made for another model?"
                )
            if unmatched:
                logger.warning(
                    "LoRA %s: %d keys match no weight of the %s: %s",
                    spec.path, len(unmatched), self.component, ", ".join(unmatched[:20]),
                )  # fmt: skip

    def delta(
        self, key: str, shape: tuple[int, ...], *, rule: torch.dtype = torch.float32, device: torch.device | None = None
    ) -> torch.Tensor | None:
        """The summed delta for weight `key` (None when no LoRA targets it), in `rule`'s dtype."""
        entries = self._pairs.get(key)
        if not entries:
            return None
        acc: torch.Tensor | None = None
        for spec, pair in entries:
            if (pair.b.shape[0], pair.a.shape[1]) != tuple(shape):
                raise CheckpointError(
                    f"LoRA {str(spec.path)!r}: delta for {key!r} has shape {(pair.b.shape[0], pair.a.shape[1])}, "
                    f"the weight has {tuple(shape)}"
                )
            factor = spec.strength * pair.scale
            if rule == torch.bfloat16:
                b = (pair.b.to(device, torch.bfloat16) * factor).float()
                a = pair.a.to(device, torch.bfloat16).float()
                product = b @ a
            else:
                product = (pair.b.to(device, torch.float32) @ pair.a.to(device, torch.float32)).mul_(factor)
            acc = product if acc is None else acc.add_(product)
        return acc.to(rule)
