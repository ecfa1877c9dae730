"""How the transformer runs: quantization, offload (block streaming), compile, attention backend.

The pipelines' CLI flags map one to one onto `RuntimeOptions`::

    --quantization fp8-cast|fp8-scaled-mm  -> quantization
    --offload none|cpu|disk                -> offload ("cpu": all blocks in pinned RAM; "disk":
                                              a few host slots refilled from the file)
    --compile [KEY=VALUE ...]              -> compile=CompileConfig.from_key_values(items)
    --attention-backend auto|sdpa|flash3|flash4|mps-sdpa -> attention_backend

Typical use (`RuntimeOptions.from_flags(args.quantization, args.offload, args.compile,
args.attention_backend)` builds the options from argparse values)::

    options = RuntimeOptions(quantization="fp8-cast", offload="disk")
    options.validate(device)   # before any heavy work: raises ValueError naming the bad value,
                               # the device's capability and the alternative
    model = build_transformer(AV_TRANSFORMER, checkpoint, options, device=device,
                              dtype=torch.bfloat16, loras=loras)

`build_transformer` returns the `LTXModel` (wrap it in `X0Model` as usual). It reads the file tensor
by tensor, fusing LoRAs per tensor before any downcast, so the host never holds a second copy of the
model. With offload, `model.block_streamer` owns the streaming state; call `release_transformer`
(or `model.block_streamer.close()`) when done. `estimate_peak_memory` in
`ltx_core.memory_estimate` predicts the device memory a run needs under these options.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltx_core.block_streaming import MAX_DEVICE_SLOTS, attach_block_streaming
from ltx_core.compilation import CompileConfig, compile_blocks
from ltx_core.devices import resolve_device
from ltx_core.loader import (
    ComponentSource,
    ComponentSpec,
    LoraSpec,
    ModelFiles,
    check_state_dict_fits,
    checkpoint_config,
)
from ltx_core.loader.builder import component_source
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.gguf_file import is_gguf
from ltx_core.loader.lora import DEFAULT_LORA_FUSION, LoraDeltas, LoraFusionPrecision
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.loader.state_dict import FileReads, StateDict
from ltx_core.loader.tensorwise import WeightConversion, load_tensorwise_files
from ltx_core.model.transformer.attention_backends import check_backend, set_attention_backend
from ltx_core.quantization import Fp8CastPolicy, Fp8ScaledMMPolicy, require_scaled_mm
from ltx_core.quantization.gguf import is_block_qtype, prepare_gguf, refuse_quantized_target
from ltx_core.runtime_choices import ACCEPTED_BACKEND_NAMES, OFFLOAD_CHOICES, QUANTIZATION_CHOICES

logger = logging.getLogger(__name__)

BLOCKS_ATTR = "transformer_blocks"


@dataclass(frozen=True)
class RuntimeOptions:
    """Run-time choices for the transformer; every field has the behaviour of a plain load by default."""

    quantization: str | None = None
    offload: str = "none"
    compile: CompileConfig | None = None
    attention_backend: str | None = None
    device_slots: int = 2  # blocks resident on the device while streaming (1-3)
    host_slots: int = 2  # host buffers of the disk source
    dedup_timesteps: bool = True

    def __post_init__(self) -> None:
        if self.quantization is not None and self.quantization not in QUANTIZATION_CHOICES:
            raise ValueError(f"--quantization {self.quantization!r} is not supported; accepted: {QUANTIZATION_CHOICES}")
        if self.offload not in OFFLOAD_CHOICES:
            raise ValueError(f"--offload {self.offload!r} is not supported; accepted: {OFFLOAD_CHOICES}")
        if not 1 <= self.device_slots <= MAX_DEVICE_SLOTS:
            raise ValueError(f"device_slots {self.device_slots} must be between 1 and {MAX_DEVICE_SLOTS}")
        if self.host_slots < 1:
            raise ValueError(f"host_slots {self.host_slots} must be at least 1")
        if self.attention_backend is not None and self.attention_backend.lower() not in (
            *ACCEPTED_BACKEND_NAMES, "flash_attention_3", "flash_attention_4", "mps_sdpa",
        ):  # fmt: skip
            raise ValueError(
                f"--attention-backend {self.attention_backend!r} is unknown; "
                f"accepted: {', '.join(ACCEPTED_BACKEND_NAMES)}"
            )

    @classmethod
    def from_flags(
        cls,
        quantization: str | None = None,
        offload: str | None = "none",
        compile: Sequence[str] | None = None,
        attention_backend: str | None = None,
    ) -> RuntimeOptions:
        """From argparse values: `compile` None when `--compile` is absent, a (possibly empty) list of
        KEY=VALUE items when given."""
        config = None if compile is None else CompileConfig.from_key_values(compile)
        backend = None if attention_backend in (None, "auto") else attention_backend
        return cls(quantization=quantization, offload=offload or "none", compile=config, attention_backend=backend)

    @property
    def streams_blocks(self) -> bool:
        return self.offload != "none"

    def validate(self, device: torch.device | str) -> None:
        """Raise before any heavy work when an option cannot run on `device`."""
        device = torch.device(device)
        if self.quantization == "fp8-scaled-mm":
            require_scaled_mm(device, "--quantization fp8-scaled-mm")
        check_backend(self.attention_backend, device)
        if self.compile is not None:
            self.compile.validate(device, streaming=self.streams_blocks)


def _quantize(
    options: RuntimeOptions, model: nn.Module, path: str | Path, spec: ComponentSpec, loras: Sequence[LoraSpec]
) -> tuple[list[str], dict[str, torch.dtype]]:
    """Prepare the meta model for the chosen quantization; (quantized module names, storage dtypes)."""
    if options.quantization == "fp8-cast":
        policy = Fp8CastPolicy()
        names = policy.prepare(model)
        storage: dict[str, torch.dtype] = {}
        for name in names:
            module = model.get_submodule(name)
            storage[f"{name}.weight"] = policy.storage_dtype
            if module.bias is not None:
                storage[f"{name}.bias"] = policy.storage_dtype
        return names, storage
    if options.quantization == "fp8-scaled-mm":
        if any(spec_.strength != 0 for spec_ in loras):
            raise ValueError(
                "LoRAs cannot be fused into fp8-scaled-mm weights (their scales would have to change); "
                "use a bfloat16 checkpoint with --quantization fp8-cast"
            )
        header = read_safetensors_header(path)
        module_infos = {m: info for k, info in header.tensors.items() if (m := spec.ops.rename(k)) is not None}
        policy = Fp8ScaledMMPolicy()
        names = policy.prepare(model, module_infos)
        return names, policy.storage_dtypes(names)
    return [], {}


def _check_transformer_source(spec: ComponentSpec, src: ComponentSource, options: RuntimeOptions) -> None:
    """Refuse, before anything is read, runtime options the source's file layout cannot serve."""
    # Streaming and fp8-scaled-mm index one file's tensors; plain and fp8-cast loads read shards too.
    needs_one_file = {
        "block streaming (--offload)": options.streams_blocks,
        "fp8-scaled-mm": options.quantization == "fp8-scaled-mm",
    }
    one_file = [what for what, needed in needs_one_file.items() if needed]
    if len(src.files) != 1 and one_file:
        raise CheckpointError(
            f"{' and '.join(one_file)} read the {spec.name} from one file; its source names {len(src.files)} "
            f"(a sharded diffusers folder): write it as one file with `python -m ltx_core.convert from-diffusers`"
        )
    if options.quantization is not None and any(is_gguf(f) for f in src.files):
        raise ValueError(
            f"--quantization {options.quantization} cannot re-quantize the GGUF file {str(src.files[0])!r} "
            "(its weights are already quantized); leave --quantization unset"
        )


def _meta_transformer(spec: ComponentSpec, config: dict[str, Any], options: RuntimeOptions) -> nn.Module:
    with torch.device("meta"):
        model = spec.configurator(config)
    if not hasattr(model, BLOCKS_ATTR) and options.streams_blocks:
        raise ValueError(f"--offload {options.offload} needs a model with {BLOCKS_ATTR!r}; {spec.name} has none")
    return model


def _transformer_lora(model: nn.Module, loras: Sequence[LoraSpec], name: str, reads: FileReads) -> LoraDeltas | None:
    """The active LoRAs' deltas over the model's weights, checked against them (None: no active LoRA)."""
    active = [lora for lora in loras if lora.strength != 0.0]
    if not active:
        return None
    weight_keys = [k for k in model.state_dict() if k.endswith(".weight")]
    lora = LoraDeltas(active, component=name, weight_keys=weight_keys)
    lora.check_targets(weight_keys)
    _refuse_lora_into_gguf(reads, lora)
    return lora


def _check_resident_weights(model: nn.Module, state_dict: StateDict, name: str, path: Path) -> None:
    """With streamed blocks, the weights read up front must be exactly the model's non-block weights."""
    wanted = {k for k in model.state_dict() if not k.startswith(f"{BLOCKS_ATTR}.")}
    missing = sorted(wanted - set(state_dict))
    unexpected = sorted(set(state_dict) - wanted)
    if missing or unexpected:
        raise CheckpointError(
            f"{str(path)!r} does not fit the {name}: missing {missing[:20]}, unexpected {unexpected[:20]}"
        )


def _ready_for_inference(
    model: nn.Module, options: RuntimeOptions, quantized: Sequence[str], device: torch.device
) -> None:
    model.eval().requires_grad_(False)
    model.dedup_timesteps = options.dedup_timesteps
    model.quantized_modules = tuple(quantized)
    set_attention_backend(model, options.attention_backend, device)
    if options.compile is not None:
        compile_blocks(getattr(model, BLOCKS_ATTR), options.compile)


def build_transformer(
    spec: ComponentSpec,
    source: str | Path | ComponentSource | ModelFiles,
    options: RuntimeOptions = RuntimeOptions(),
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.bfloat16,
    loras: Sequence[LoraSpec] = (),
    lora_fusion: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
) -> nn.Module:
    """Build a transformer spec (e.g. `AV_TRANSFORMER`) from `source` (a file path, or the transformer
    of a set of model files) under `options`.

        `lora_fusion` is the rounding of LoRA fusion into unquantized weights, as in `build_model`: the
        reference's (in each weight's stored dtype, the default) or float32; quantized weights always take
        the bfloat16 rule before the downcast.
    """
    device = resolve_device(device)
    options.validate(device)
    src = component_source(spec, source)
    _check_transformer_source(spec, src, options)
    path = src.files[0]
    reads = src.reads(spec.ops)
    config = checkpoint_config(spec, src)
    spec = replace(spec, ops=spec.ops.after(src.key_translation))
    model = _meta_transformer(spec, config, options)
    quantized, storage = _quantize(options, model, path, spec, loras)
    lora = _transformer_lora(model, loras, spec.name, reads)
    conversion = WeightConversion(dtype=dtype, storage_dtypes=storage, lora=lora, lora_rule=_lora_rule(lora_fusion))

    streamed = options.streams_blocks
    keep = (lambda key: not key.startswith(f"{BLOCKS_ATTR}.")) if streamed else None
    state_dict = load_tensorwise_files(reads, conversion, device=device, keep=keep)
    if not state_dict:
        where = " + ".join(str(f) for f in src.files)
        raise CheckpointError(f"{where!r} holds no {spec.name} weights; expected {spec.expected_kind}")
    if streamed:
        _check_resident_weights(model, state_dict, spec.name, path)
        prepare_gguf(model, state_dict, dtype)
        model.load_state_dict(state_dict, strict=False, assign=True)
        model.block_streamer = attach_block_streaming(
            model, path, spec.ops, conversion, device=device, source="ram" if options.offload == "cpu" else "disk",
            device_slots=options.device_slots, host_slots=options.host_slots, prefetch=options.host_slots - 1,
            blocks_attr=BLOCKS_ATTR,
        )  # fmt: skip
    else:
        check_state_dict_fits(model, state_dict, component=spec.name, path=path)
        prepare_gguf(model, state_dict, dtype)
        model.load_state_dict(state_dict, strict=True, assign=True)
    _ready_for_inference(model, options, quantized, device)
    logger.info(
        "built %s from %s (%s, %s, quantization %s, offload %s, %d quantized modules)",
        spec.name, Path(path).name, dtype, device, options.quantization, options.offload, len(quantized),
    )  # fmt: skip
    return model


def _refuse_lora_into_gguf(reads: FileReads, lora: LoraDeltas) -> None:
    """Before any tensor is read: a LoRA targeting a GGUF-quantized weight is refused (see
    `ltx_core.quantization.gguf`), streamed blocks included."""
    for path, ops in reads:
        if not is_gguf(path):
            continue
        for file_key, info in read_safetensors_header(path).tensors.items():
            key = ops.rename(file_key)
            if key is not None and key in lora and is_block_qtype(info.dtype):
                refuse_quantized_target(key, info.dtype)


def _lora_rule(lora_fusion: LoraFusionPrecision | str) -> torch.dtype | None:
    """The WeightConversion rounding dtype of a fusion precision (None: each weight's stored dtype)."""
    precision = LoraFusionPrecision.parse(lora_fusion)
    return torch.float32 if precision is LoraFusionPrecision.FLOAT32 else None


def release_transformer(model: nn.Module) -> None:
    """Stop streaming (if any) and drop the model's weights."""
    streamer = getattr(model, "block_streamer", None)
    if streamer is not None:
        streamer.close()
        model.block_streamer = None
    model.to(torch.device("meta"))
