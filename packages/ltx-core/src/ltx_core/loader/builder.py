"""Building a model from a checkpoint: configure on the meta device, then load weights once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltx_core.devices import resolve_device
from ltx_core.loader.cache import StateDictCache
from ltx_core.loader.component_source import Component, ComponentSource
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.lora import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec, fuse_loras
from ltx_core.loader.model_files import ModelFiles, model_files_of, names_a_model_folder
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.state_dict import StateDict, load_files, stored_float_dtypes_of, whole_key
from ltx_core.quantization.gguf import prepare_gguf

logger = logging.getLogger(__name__)

Configurator = Callable[[dict[str, Any]], nn.Module]
StateDictRewrite = Callable[[StateDict], StateDict]

_MAX_LISTED_KEYS = 20


@dataclass(frozen=True)
class ComponentSpec:
    """How to build one component out of a checkpoint file.

    `configurator` receives the file's whole `config` metadata (all sections for the single-file
    checkpoint, the flat object for upsampler files) and returns the module; it is run on the meta
    device, so it must allocate no real memory and must not create non-persistent buffers that
    need real values (compute such constants in forward, or make them persistent weights).
    `config_section` names the section it needs, so a wrong file is reported before building.
    `component` names the part of a `ModelFiles` set it is built from (None: a standalone file,
    such as a latent upsampler, always passed as a path).
    `rewrite`, when set, sees the whole state dict after the per-key rules, in the dtypes the file
    stores (before the cast to the build dtype): for rewrites that need sibling tensors, such as
    static gates folded into the weights they scale.
    """

    name: str
    ops: SDOps
    configurator: Configurator
    config_section: str | None = None
    expected_kind: str = "an LTX-2 single-file checkpoint"
    component: Component | None = None
    rewrite: StateDictRewrite | None = None


def _listing(keys: Sequence[str]) -> str:
    shown = ", ".join(sorted(keys)[:_MAX_LISTED_KEYS])
    more = f" ... and {len(keys) - _MAX_LISTED_KEYS} more" if len(keys) > _MAX_LISTED_KEYS else ""
    return f"{len(keys)}: {shown}{more}"


Source = str | Path | ComponentSource | ModelFiles


def component_source(spec: ComponentSpec, source: Source) -> ComponentSource:
    """The files `spec` is read from: a plain path (one file, released key names), a component
    source, or the matching component of a set of model files."""
    if isinstance(source, ComponentSource):
        return source
    if isinstance(source, ModelFiles):
        if spec.component is None:
            raise CheckpointError(f"the {spec.name} is not part of a set of model files; pass its own file (a path)")
        return source.source(spec.component)
    if names_a_model_folder(source):
        # A folder given where a file is expected: a standalone component's own folder (a diffusers
        # `latent_upsampler/`), else a model folder read as a set of model files.
        if spec.component is None:
            from ltx_core.loader.diffusers_folder import upsampler_source

            return upsampler_source(source)
        return model_files_of(source).source(spec.component)
    return ComponentSource(spec.component, (Path(source),))


def checkpoint_config(spec: ComponentSpec, source: Source) -> dict[str, Any]:
    """The `config` metadata `spec` is built from, validated to hold the needed section."""
    src = component_source(spec, source)
    kind = f"; expected {spec.expected_kind}"
    config = src.read_metadata().get("config")
    if not isinstance(config, dict):
        raise CheckpointError(f"{str(src.path)!r} has no 'config' entry in its safetensors metadata{kind}")
    if spec.config_section is not None and not isinstance(config.get(spec.config_section), dict):
        present = sorted(k for k, v in config.items() if isinstance(v, dict))
        raise CheckpointError(
            f"{str(src.path)!r} cannot provide the {spec.name}: its config has no "
            f"{spec.config_section!r} section (sections present: {present}){kind}"
        )
    return config


def configure_on_meta(spec: ComponentSpec, source: Source) -> nn.Module:
    """`spec` built on the meta device from the config of `source` (no weight read): what the config
    describes. A config the model cannot be built from (sizes that do not divide, a missing field) is a
    `CheckpointError` naming where the config comes from (a file, or a diffusers folder's `config.json`s)."""
    src = component_source(spec, source)
    config = checkpoint_config(spec, src)
    try:
        with torch.device("meta"):
            return spec.configurator(config)
    except (ValueError, KeyError, TypeError) as e:  # CheckpointError is a ValueError
        detail = str(e) if not isinstance(e, KeyError) else f"no {e} entry"
        raise CheckpointError(f"{src.config_origin} does not describe a buildable {spec.name}: {detail}") from None


def header_weight_shapes(spec: ComponentSpec, source: Source) -> dict[str, tuple[int, ...]]:
    """Module key -> stored shape of every weight `spec` reads from `source`, from the headers alone (what a
    LoRA is checked against before the model is built). A weight stored in pieces (`piece_key`) has them
    joined along dim 0, as loading does."""
    src = component_source(spec, source)
    shapes: dict[str, tuple[int, ...]] = {}
    for path, ops in src.reads(spec.ops):
        for key, info in src.header(path).tensors.items():
            module_key = ops.rename(key)
            if module_key is None:
                continue
            whole = whole_key(module_key)
            if whole != module_key and whole in shapes and info.shape:
                shapes[whole] = (shapes[whole][0] + info.shape[0], *info.shape[1:])
            else:
                shapes[whole] = info.shape
    return shapes


def check_state_dict_fits(module: nn.Module, state_dict: StateDict, *, component: str, path: str | Path) -> None:
    """Strict key and shape check, raising one error that lists every problem."""
    expected = module.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    problems = []
    if missing:
        problems.append(f"missing keys {_listing(missing)}")
    if unexpected:
        problems.append(f"unexpected keys {_listing(unexpected)}")
    if problems:
        raise CheckpointError(f"{str(path)!r} does not fit the {component}: " + "; ".join(problems))
    for key, value in expected.items():
        found = tuple(state_dict[key].shape)
        if tuple(value.shape) != found:
            raise CheckpointError(
                f"{str(path)!r} does not fit the {component}: {key!r} has shape {found}, "
                f"the model expects {tuple(value.shape)}"
            )


def build_model(
    spec: ComponentSpec,
    source: Source,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
    loras: Sequence[LoraSpec] = (),
    cache: StateDictCache | None = None,
    lora_fusion: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
) -> nn.Module:
    """Build `spec` from `source`: meta-device construction, lazy read of its keys, LoRA fusion,
    cast of floating tensors to `dtype`, strict load with `assign`, move to `device`, eval mode.

    `source` is a file path (read with the released key names), a `ComponentSource`, or a
    `ModelFiles` set (the component `spec.component` of it).

    `lora_fusion`: `weight-dtype` (default) fuses LoRAs with the roundings of the dtype the file
    stores each weight in, as the reference does before casting to `dtype`; `float32` accumulates
    in float32 (see `ltx_core.loader.lora`)."""
    device = resolve_device(device)
    src = component_source(spec, source)
    module = configure_on_meta(spec, src)
    ops = spec.ops.after(src.key_translation)
    reads = src.reads(spec.ops)
    files = list(src.files)
    where = " + ".join(str(f) for f in files)

    def load() -> StateDict:
        if spec.rewrite is None:
            return load_files(reads, dtype=dtype, headers=src.headers)
        rewritten = spec.rewrite(load_files(reads, headers=src.headers))
        return {k: v.to(dtype) if v.is_floating_point() else v for k, v in rewritten.items()}

    cache_ops = ops if not src.file_translations else tuple(o for _, o in reads)
    state_dict = cache.get_or_load(files, cache_ops, dtype, load) if cache is not None else load()
    if not state_dict:
        raise CheckpointError(
            f"{where!r} holds no {spec.name} weights (no key matches the rules {ops.name!r}); "
            f"expected {spec.expected_kind}"
        )
    check_state_dict_fits(module, state_dict, component=spec.name, path=where)
    if loras:
        state_dict = fuse_loras(
            state_dict,
            loras,
            component=spec.name,
            precision=lora_fusion,
            stored_dtypes=stored_float_dtypes_of(reads, headers=src.headers),
            device=device,
        )
    # GGUF block-quantized weights stay quantized: their Linears dequantize per call.
    prepare_gguf(module, state_dict, dtype)
    module.load_state_dict(state_dict, strict=True, assign=True)
    leftover = [n for n, t in (*module.named_parameters(), *module.named_buffers()) if t.is_meta]
    if leftover:
        raise CheckpointError(f"{spec.name}: tensors left without values after loading: {_listing(leftover)}")
    module = module.to(device).eval().requires_grad_(False)
    logger.info("built %s from %s (%s, %s)", spec.name, _file_names(src.files), dtype, device)
    return module


def _file_names(files: Sequence[Path]) -> str:
    """The files a model was built from, for the log: a diffusers weights file with its component folder
    (every folder's file has the same name, `vocoder/diffusion_pytorch_model.safetensors`)."""
    from ltx_core.loader.diffusers_folder import WEIGHTS_STEM

    return ", ".join(f"{f.parent.name}/{f.name}" if f.name.startswith(WEIGHTS_STEM) else f.name for f in files)


def free_model_weights(module: nn.Module) -> None:
    """Release a model's weights (moved to the meta device); the module can no longer run."""
    module.to(torch.device("meta"))
