"""How the Gemma text encoder is held in memory: the text-encoder modes.

    full         every weight resident on the device, in the run dtype.
    fp8          the decoder layers' Linear weights stored as float8_e4m3fn and upcast per layer at use
                 (the transformer's fp8-cast, `Fp8CastPolicy`, with Gemma's projection names); embeddings,
                 norms and the vision tower stay in the run dtype. Any device. About half the weight
                 memory of Gemma 3 12B. Contexts differ from `full` by the float8 rounding of the weights:
                 relative Frobenius error of the video / audio contexts (Gemma, then the connectors)
                 measured 0.025 / 0.025 on the tiny random Gemma 3 against bf16, and 0.008 / 0.007 on the
                 golden set's packed Gemma 4 against float32; tests hold it under `FP8_CONTEXT_RTOL` = 0.06.
    stream-ram   the decoder layers served one block at a time by `ltx_core.block_streaming` from packed
                 host buffers; the rest (embeddings, final norm, vision tower) resident.
    stream-disk  the same, each layer read from the weight files as it is needed (a few host slots and a
                 read-ahead thread), so neither the device nor the host holds the layers.

Streamed runs give contexts bit-identical to `full`: the same tensors run the same forward, only where
they live between layers changes. Layers of different shapes (Gemma 4's sliding and full-attention
layers) or of different stored types (a llama.cpp Q4_K_M file's Q6_K layers) are streamed as separate
groups, each with its own slots.

Weights are read tensor by tensor (`load_tensorwise_files`) into a model built on the meta device, for
every source: a Gemma 3 folder (sharded or not), a packed Gemma 4 file, a GGUF Gemma (`gguf_gemma`;
its block-quantized Linears stay quantized and are dequantized per call, streamed or not).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from ltx_core.block_streaming import BlockStreamer, attach_block_streaming
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.gguf_file import is_gguf
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.tensorwise import WeightConversion, load_tensorwise_files
from ltx_core.quantization.fp8_cast import FP8_STORAGE_DTYPE, Fp8CastPolicy
from ltx_core.quantization.gguf import prepare_gguf
from ltx_core.runtime_choices import TEXT_ENCODER_MODES
from ltx_core.text_encoders.gemma.gemma_weights import GemmaWeights

logger = logging.getLogger(__name__)

# --offload of the transformer -> the text-encoder mode that keeps Gemma as far off the device.
MODE_FOR_OFFLOAD = {"none": "full", "cpu": "stream-ram", "disk": "stream-disk"}
# Bound of the fp8 mode's contexts against bf16 (relative Frobenius error), see the module docstring.
FP8_CONTEXT_RTOL = 0.06
# Gemma's attention and MLP projections (Gemma 3 and Gemma 4 name them alike).
GEMMA_FP8_SUFFIXES = (".q_proj", ".k_proj", ".v_proj", ".o_proj", ".gate_proj", ".up_proj", ".down_proj")
# Streamed layers of one shape are renamed `<_GROUP>.<position in group>.*` for the block source.
_GROUP = "streamed_layers"


def check_text_encoder_mode(mode: str) -> str:
    if mode not in TEXT_ENCODER_MODES:
        raise ValueError(f"text encoder mode {mode!r} is not supported; accepted: {', '.join(TEXT_ENCODER_MODES)}")
    return mode


def gemma_fp8_policy(layers: str) -> Fp8CastPolicy:
    """fp8-cast of the Linears of Gemma's decoder layers (the ModuleList at dotted path `layers`)."""
    return Fp8CastPolicy(must_contain=f"{layers}.", suffixes=GEMMA_FP8_SUFFIXES)


@dataclass
class LoadedGemma:
    model: nn.Module
    streamers: list[BlockStreamer]


def _layout_signature(layer: nn.Module) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((n, tuple(t.shape)) for n, t in (*layer.named_parameters(), *layer.named_buffers()))


class _LayerGroup(nn.Module):
    """Layers of one shape, listed for a block streamer (the layers stay where they are in the model)."""

    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(layers)


def _stored_types(weights: GemmaWeights, prefix: str) -> dict[int, tuple[tuple[str, str], ...]]:
    """Layer index -> sorted (name in the layer, stored type) of its tensors, from the files' headers."""
    from ltx_core.loader.safetensors_header import read_safetensors_header

    out: dict[int, list[tuple[str, str]]] = {}
    for path in weights.files:
        for file_key, info in read_safetensors_header(path).tensors.items():
            key = weights.ops.rename(file_key)
            if key is None or not key.startswith(prefix):
                continue
            index, _, local = key[len(prefix) :].partition(".")
            if index.isdigit():
                out.setdefault(int(index), []).append((local, info.dtype))
    return {index: tuple(sorted(types)) for index, types in out.items()}


def _group_rules(base: SDOps, prefix: str, indices: list[int]) -> SDOps:
    rules = SDOps(f"gemma_layers_{indices[0]}")
    for position, index in enumerate(indices):
        rules = rules.keeping(prefix=f"{prefix}{index}.").renaming_prefix(f"{prefix}{index}.", f"blocks.{position}.")
    return rules.after(base)


def _place(model: nn.Module, device: torch.device, dtype: torch.dtype | None) -> None:
    """Move every materialised parameter and buffer to `device` (floating ones of the run precision
    to `dtype` when given; float8 storage and GGUF bytes keep theirs); meta tensors stay."""

    def moved(t: torch.Tensor) -> torch.Tensor:
        if t.is_meta:
            return t
        cast = dtype if dtype is not None and t.is_floating_point() and t.dtype != FP8_STORAGE_DTYPE else None
        return t.to(device=device, dtype=cast)

    for module in model.modules():
        for name, param in module._parameters.items():
            if param is not None and not param.is_meta:
                value = moved(param.detach())
                if value.device != param.device or value.dtype != param.dtype:
                    module._parameters[name] = nn.Parameter(value, requires_grad=False)
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = moved(buffer)


def _meta_model(weights: GemmaWeights, dtype: torch.dtype) -> nn.Module:
    from accelerate import init_empty_weights

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # as transformers' from_pretrained builds: computed buffers in the run dtype
    try:
        with init_empty_weights(include_buffers=False):
            return weights.make_model()
    finally:
        torch.set_default_dtype(previous)


def _fp8_storage(model: nn.Module, layers: str) -> dict[str, torch.dtype]:
    """Turn the layers' Linears into float8-stored ones; their keys -> float8."""
    policy = gemma_fp8_policy(layers)
    storage: dict[str, torch.dtype] = {}
    for name in policy.prepare(model):
        storage[f"{name}.weight"] = policy.storage_dtype
        if model.get_submodule(name).bias is not None:
            storage[f"{name}.bias"] = policy.storage_dtype
    return storage


def _check_keys(model: nn.Module, state_dict: dict, weights: GemmaWeights, skip: str | None, where: str) -> None:
    expected = {k for k in model.state_dict() if skip is None or not k.startswith(skip)}
    missing = sorted(expected - set(state_dict) - weights.tied)
    unexpected = sorted(set(state_dict) - expected)
    if missing or unexpected:
        raise CheckpointError(
            f"Gemma weights in {where!r} do not fit its config: missing {missing[:10]}, unexpected {unexpected[:10]}"
        )


def _stream_layers(
    weights: GemmaWeights, layers: nn.ModuleList, conversion: WeightConversion, gguf: bool, source: str,
    device: torch.device, device_slots: int, host_slots: int,
) -> list[BlockStreamer]:  # fmt: skip
    """One block streamer per group of layers of one shape and one set of stored types."""
    prefix = f"{weights.layers}."
    stored = _stored_types(weights, prefix) if gguf else {}
    groups: dict[tuple, list[int]] = {}
    for index, layer in enumerate(layers):
        # llama.cpp's mixed quantizations (Q4_K_M: some layers' attn_v / ffn_down in Q6_K) stream as
        # separate groups too: a block layout fixes each tensor's storage type.
        groups.setdefault((_layout_signature(layer), stored.get(index, ())), []).append(index)
    return [
        attach_block_streaming(
            _LayerGroup([layers[i] for i in indices]),
            weights.files,
            _group_rules(weights.ops, prefix, indices),
            conversion,
            device=device,
            source=source,
            device_slots=device_slots,
            host_slots=host_slots,
            prefetch=host_slots - 1,
            blocks_attr="blocks",
        )
        for indices in groups.values()
    ]


def load_gemma_weights(
    weights: GemmaWeights,
    mode: str,
    *,
    dtype: torch.dtype,
    device: torch.device,
    device_slots: int = 2,
    host_slots: int = 2,
) -> LoadedGemma:
    """Build the module of `weights` on the meta device and give it its weights under `mode`."""
    check_text_encoder_mode(mode)
    gguf = any(is_gguf(f) for f in weights.files)
    if mode == "fp8" and gguf:
        raise ValueError(
            f"text encoder mode fp8 cannot re-quantize the GGUF file {str(weights.files[0])!r} (its weights are "
            "already quantized); use full, stream-ram or stream-disk"
        )
    model = _meta_model(weights, dtype)
    layers = model.get_submodule(weights.layers)
    conversion = WeightConversion(
        dtype=dtype, storage_dtypes=_fp8_storage(model, weights.layers) if mode == "fp8" else {}
    )
    skip = f"{weights.layers}." if mode.startswith("stream") else None  # streamed layers are read per use
    keep = (lambda key: not key.startswith(skip)) if skip else None
    state_dict = load_tensorwise_files([(f, weights.ops) for f in weights.files], conversion, device=device, keep=keep)
    where = str(weights.files[0]) + (f" (+{len(weights.files) - 1} shards)" if len(weights.files) > 1 else "")
    _check_keys(model, state_dict, weights, skip, where)
    prepare_gguf(model, state_dict, dtype)
    model.load_state_dict(state_dict, strict=False, assign=True)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    streamers: list[BlockStreamer] = []
    if skip is not None:
        source = "ram" if mode == "stream-ram" else "disk"
        streamers = _stream_layers(weights, layers, conversion, gguf, source, device, device_slots, host_slots)
    _place(model, device, dtype if weights.cast_buffers else None)
    tensors = (*model.named_parameters(), *model.named_buffers())
    leftover = [n for n, t in tensors if t.is_meta and not (skip and n.startswith(skip))]
    if leftover:
        raise CheckpointError(f"Gemma tensors in {where!r} left without values: {leftover[:10]}")
    model.eval().requires_grad_(False)
    logger.info(
        "loaded Gemma from %s (%s, %s, mode %s%s)", where, dtype, device, mode,
        f", {len(layers)} layers in {len(streamers)} streamed group(s)" if streamers else "",
    )  # fmt: skip
    return LoadedGemma(model=model, streamers=streamers)


def text_encoder_mode_for(mode: str | None, offload: str = "none") -> str:
    """The mode a run uses: `mode` when given, else the one matching the transformer's `--offload`
    (none -> full, cpu -> stream-ram, disk -> stream-disk), so Gemma fits where the transformer does."""
    if mode is not None:
        return check_text_encoder_mode(mode)
    if offload not in MODE_FOR_OFFLOAD:
        raise ValueError(f"offload {offload!r} is not supported; accepted: {', '.join(MODE_FOR_OFFLOAD)}")
    return MODE_FOR_OFFLOAD[offload]
