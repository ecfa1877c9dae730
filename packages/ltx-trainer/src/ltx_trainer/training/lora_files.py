"""peft adapters on our transformer, and the LoRA file format we save.

Saved files use the ComfyUI layout by default: `diffusion_model.<module>.lora_A.weight` (rank x in) and
`.lora_B.weight` (out x rank); `checkpoints.lora_format` picks the diffusers or kohya layout instead
(`ltx_core.loader.lora_layouts`). The alpha / rank scale is multiplied into lora_B and no alpha is
written, so all readers agree: our pipelines' `--lora` and the reference's fusion (both apply
strength * B @ A when there is no alpha) and ComfyUI (which applies alpha / rank only when alpha is
present). The header carries the training strategy and, for scaled IC-LoRA references, the reference
scale factors the pipelines read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import torch
from peft import LoraConfig as PeftLoraConfig
from peft import get_peft_model
from safetensors.torch import save_file
from torch import nn

from ltx_core.loader.key_rules import COMFY_LORA_PREFIX
from ltx_core.loader.lora_layouts import (
    LoraFactors,
    LoraLayout,
    LoraWeights,
    lora_file_tensors,
    lora_weights_from_tensors,
)
from ltx_pipelines.io.atomic_files import apply_umask, atomic_output

_PEFT_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.(?P<part>lora_[AB])(?:\.default)?\.weight$")


def add_lora(model: nn.Module, rank: int, alpha: float, dropout: float, target_modules: list[str]) -> nn.Module:
    """Wrap `model` with trainable peft LoRA adapters on the modules whose names end with a target."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    unmatched = [t for t in target_modules if not any(n == t or n.endswith("." + t) for n in names)]
    if unmatched:
        examples = sorted({n.split(".", 2)[-1] for n in names if n.startswith("transformer_blocks.0.")})[:24]
        raise ValueError(
            f"lora.target_modules {unmatched} match no linear layer of the transformer "
            f"(names in a block: {', '.join(examples)})"
        )
    config = PeftLoraConfig(
        r=rank, lora_alpha=alpha, target_modules=list(target_modules), lora_dropout=dropout, init_lora_weights=True
    )
    return get_peft_model(model, config)


def lora_scale(rank: int, alpha: float) -> float:
    return float(alpha) / float(rank)


def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The raw (unscaled) adapter weights keyed by module path + `.lora_A` / `.lora_B`."""
    state = {}
    for name, param in model.named_parameters():
        match = _PEFT_KEY.match(name)
        if match:
            state[f"{match['module']}.{match['part']}"] = param.detach()
    return state


def load_adapter_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    params = {}
    for name, param in model.named_parameters():
        match = _PEFT_KEY.match(name)
        if match:
            params[f"{match['module']}.{match['part']}"] = param
    missing = sorted(set(params) - set(state))
    unexpected = sorted(set(state) - set(params))
    if missing or unexpected:
        raise ValueError(f"adapter weights do not fit: missing {missing[:5]}, unexpected {unexpected[:5]}")
    with torch.no_grad():
        for key, param in params.items():
            param.copy_(state[key].to(param.dtype))


def comfy_lora_tensors(model: nn.Module, scale: float, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """ComfyUI-layout tensors with `scale` baked into lora_B."""
    out = {}
    for key, value in adapter_state(model).items():
        module, part = key.rsplit(".", 1)
        tensor = value.float() * scale if part == "lora_B" else value.float()
        out[f"{COMFY_LORA_PREFIX}{module}.{part}.weight"] = tensor.to(dtype).contiguous().cpu()
    return out


def adapter_state_from_file(tensors: Mapping[str, torch.Tensor], scale: float) -> dict[str, torch.Tensor]:
    """Inverse of the saved file (any layout `save_lora_file` writes), up to the saved precision."""
    weights = lora_weights_from_tensors(tensors, source="checkpoint")
    state = {}
    for module, f in weights.modules.items():
        state[f"{module}.lora_A"] = f.down.float()
        state[f"{module}.lora_B"] = f.up.float() * (f.scale / scale)
    return state


def save_lora_file(
    path: Path,
    model: nn.Module,
    rank: int,
    alpha: float,
    dtype: torch.dtype,
    metadata: Mapping[str, str],
    layout: LoraLayout | str = LoraLayout.COMFYUI,
    *,
    atomic: bool = True,
) -> Path:
    """Write the adapters of `model` to `path` in `layout` (comfyui, diffusers or kohya), the scale
    multiplied into lora_B; through a temporary name unless `atomic` is False (the caller then writes
    to a temporary file of its own)."""
    header = {"format": "pt", "lora_rank": str(rank), "lora_alpha_baked": json.dumps(alpha), **metadata}
    comfy = comfy_lora_tensors(model, lora_scale(rank, alpha), dtype)
    if LoraLayout.parse(layout) is LoraLayout.COMFYUI:
        tensors = comfy
    else:
        modules = {
            key[len(COMFY_LORA_PREFIX) : -len(".lora_A.weight")]: LoraFactors(
                down=value, up=comfy[key.replace(".lora_A.weight", ".lora_B.weight")]
            )
            for key, value in comfy.items()
            if key.endswith(".lora_A.weight")
        }
        tensors, header = lora_file_tensors(LoraWeights(str(path), LoraLayout.COMFYUI, modules, header), layout)
    if not atomic:
        save_file(tensors, str(path), metadata=header)
        apply_umask(path)  # safetensors recreates the file private (0600)
        return path
    with atomic_output(path, overwrite=True) as tmp:
        save_file(tensors, str(tmp), metadata=header)
        apply_umask(tmp)
    return path
