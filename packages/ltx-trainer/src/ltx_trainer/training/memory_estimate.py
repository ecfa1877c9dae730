"""Peak device memory of a training run, estimated before any weight is loaded, and what would fit.

The estimate adds, for the configured run:
- the transformer's weights in the dtype the trainer keeps them in (bf16 for LoRA under bf16 autocast,
  else float32), or in quanto's stored form for the quantized Linears (1 byte per value for int8/fp8,
  1/2 for int4, 1/4 for int2), counted on a meta-device build from the checkpoint config;
- the trainable parameters (LoRA adapters on the target Linears, or the whole model), their float32
  gradients and the optimizer state (AdamW: two float32 moments; 8-bit AdamW: two bytes);
- the frozen text connectors (in the base's dtype): the trainer runs them over every sample before the
  first step and releases them when all the contexts fit its cache (`training.context_cache`), so they
  count only at the start (beside the base and the adapters, before any gradient or optimizer state),
  unless the dataset outgrows the cache; on the CPU the kept contexts count too;
- the activations autograd saves for the backward pass (fitted on the CPU with autograd's saved-tensor
  hooks, each storage counted once, `tests/test_memory_plan.py`): per block
  `BLOCK_BYTES_PER_TOKEN_WIDTH` bytes per token and stream width, `BLOCK_BYTES_PER_TOKEN` per token and
  `BLOCK_BYTES_PER_TEXT_WIDTH` per text token and
  stream width (the projected text context). Attention keeps no score matrix (flash-style kernels on
  CUDA and on the CPU). With gradient checkpointing, each block keeps its float32 input streams, and
  one block's activations are live while it is recomputed;
- on the CPU, the process itself (the Python runtime and the trainer's libraries, `CPU_RUNTIME_BYTES`);
- block swap (`acceleration.blocks_to_swap: N`): the device holds n - N blocks (the streamer's device
  slots, `training/block_swap.py`), the host all n blocks (`ram` source) or two (`disk`); on the CPU the
  host is the device, so there both count;
- fp8-cast: the selected block Linears at one byte per value; without gradient checkpointing autograd
  keeps each block's upcast (compute-dtype) weights for the backward pass, with it one block's;
- activation offload: the checkpointed block inputs live in host memory, the device holds one block's
  (the one being recomputed) and the one in flight.

The peak is the larger of the start (connectors running) and a training step. On the CPU the measured
peak RSS follows the estimate because the trainer fixes glibc's mmap threshold (`training.host_memory`):
with glibc's moving threshold freed activations stay in the heaps and the peak RSS grew past the estimate
by a share of the activations, up to a fifth at 1056 tokens (benchmarks/trainer_memory_plan.py). On CUDA
the estimate assumes a fused SDPA kernel (flash or memory-efficient: no token x token score matrix) and
counts no caching-allocator slack.

`check_training_fits` compares the peak with the device's free memory (available RAM on the CPU) and,
when it does not fit, raises an error naming the first setting of `setting_ladder` that would: the
fastest first, gradient checkpointing, activation offload, then the fewest swapped blocks (at each
count the bf16 base before the fp8-cast one, which changes the weights). `blocks_to_swap: auto` takes
the fewest swapped blocks that fit (`resolve_blocks_to_swap`). `python -m ltx_trainer.memory_table`
prints the plan's table of settings per card size.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltx_core.model.transformer import configure_transformer
from ltx_core.model.transformer.config import ModelVariant

logger = logging.getLogger(__name__)

_GIB = 2**30
# Saved activations of a LoRA step over a frozen base: the distinct storage autograd keeps (a tensor saved
# by several ops counts once, the weights not at all). float32: least-squares fit (relative error) of 6
# configurations (2-4 blocks, the demo widths at 128 text tokens and 1/4 of the 22B widths at 1024 text
# tokens, 288-2080 tokens, rank 8 and 64): all within 1.5%. bf16 autocast: the float32 values times
# 0.71, the bf16/float32 ratio of the saved-tensor peaks measured at widths 64-128 (not fitted alone).
BLOCK_BYTES_PER_TOKEN_WIDTH = {"float32": 111.0, "bf16": 79.0}
BLOCK_BYTES_PER_TOKEN = {"float32": 401.0, "bf16": 285.0}
BLOCK_BYTES_PER_TEXT_WIDTH = {"float32": 17.1, "bf16": 12.1}
CPU_RUNTIME_BYTES = 800 * 2**20  # RSS of a process that imported the trainer (793 MiB measured)
QUANTIZED_BYTES_PER_VALUE = {
    "int8-quanto": 1.0,
    "fp8-quanto": 1.0,
    "fp8uz-quanto": 1.0,
    "int4-quanto": 0.5,
    "int2-quanto": 0.25,
    "fp8-cast": 1.0,  # the Fp8CastPolicy's Linears (weight and bias) only
}
HOST_SWAP_SLOTS = 2  # host buffers of the disk source (ltx_core RuntimeOptions.host_slots)


@dataclass(frozen=True)
class TrainingSettings:
    """The settings that decide a run's memory."""

    lora_rank: int | None = 32  # None: full training
    lora_targets: tuple[str, ...] = ("to_q", "to_k", "to_v", "to_out.0")
    mixed_precision: str = "bf16"  # "no" | "fp16" | "bf16"
    quantization: str | None = None
    gradient_checkpointing: bool = False
    optimizer: str = "adamw"  # "adamw" | "adamw8bit"
    with_audio: bool = True
    blocks_to_swap: int = 0
    swap_source: str = "ram"  # "ram" | "disk"
    offload_activations: bool = False

    def describe(self) -> str:
        """The memory-relevant settings, in the config's words."""
        parts = [f"rank {self.lora_rank}" if self.lora_rank is not None else "full training"]
        parts.append(self.quantization or ("bf16 base" if self.mixed_precision == "bf16" else "float32 base"))
        parts.append(self.optimizer)
        if self.gradient_checkpointing:
            parts.append("gradient checkpointing")
        if self.offload_activations:
            parts.append("activation offload")
        if self.blocks_to_swap:
            parts.append(f"{self.blocks_to_swap} blocks swapped ({self.swap_source})")
        return ", ".join(parts)


@dataclass(frozen=True)
class TrainingShape:
    """Tokens of one training sample and the samples per micro-step."""

    video_tokens: int
    audio_tokens: int = 0
    text_tokens: int = 1024
    batch: int = 1
    samples: int = 1  # dataset size: bounds the kept text contexts


@dataclass(frozen=True)
class TrainingMemoryEstimate:
    base_weights: int
    trainable: int  # parameters + gradients + optimizer state
    connectors: int
    activations: int
    runtime: int  # CPU: the process itself and the kept text contexts
    trainable_weights: int = 0  # the trainable parameters alone (the start, before any step)
    connectors_released: bool = False  # every sample's contexts fit the cache: no connectors in the loop
    host: int = 0  # host memory beside the device's (swapped blocks, offloaded activations); 0 on the CPU

    @property
    def start(self) -> int:
        """Before the first step: the connectors run over every sample beside the weights."""
        return self.base_weights + self.trainable_weights + self.connectors + self.runtime

    @property
    def step(self) -> int:
        connectors = 0 if self.connectors_released else self.connectors
        return self.base_weights + self.trainable + connectors + self.activations + self.runtime

    @property
    def peak(self) -> int:
        return max(self.start, self.step)

    def describe(self) -> str:
        when = "released before step 1" if self.connectors_released else "kept"
        return (
            f"{self.peak / _GIB:.1f} GiB (base weights {self.base_weights / _GIB:.1f}, trainable + optimizer "
            f"{self.trainable / _GIB:.2f}, text connectors {self.connectors / _GIB:.2f} ({when}), activations "
            f"{self.activations / _GIB:.1f}, runtime {self.runtime / _GIB:.1f} GiB"
            + (f"; host memory {self.host / _GIB:.1f} GiB)" if self.host else ")")
        )


def _is_target(name: str, targets: Sequence[str]) -> bool:
    return any(name == t or name.endswith("." + t) for t in targets)


def _base_element_size(settings: TrainingSettings) -> int:
    """Bytes per value of the frozen base and connectors: bf16 under bf16 LoRA, else float32 (training/build.py)."""
    return 2 if settings.lora_rank is not None and settings.mixed_precision == "bf16" else 4


@dataclass(frozen=True)
class _ModelFacts:
    """What the estimate needs of the model under one (rank, targets, dtype, quantization, audio) choice;
    built once on the meta device, shared by every swap count and shape tried."""

    blocks: int
    block_bytes: int  # one block's frozen weights as stored
    other_bytes: int  # the frozen weights outside the blocks
    upcast_bytes: int  # one block's fp8-cast weights in the compute dtype (what autograd saves per block)
    trainable_params: int
    full_params: int
    connector_bytes: int
    video_dim: int
    audio_dim: int


def _model_facts(checkpoint_config: Mapping[str, Any], settings: TrainingSettings) -> _ModelFacts:
    from ltx_core.quantization import Fp8CastPolicy
    from ltx_trainer.training.text_contexts import text_connectors_spec

    # A run without audio builds the video-only transformer (training/build.py: transformer_spec).
    variant = ModelVariant.AUDIO_VIDEO if settings.with_audio else ModelVariant.VIDEO_ONLY
    with torch.device("meta"):
        model = configure_transformer(checkpoint_config, variant)
    base_size = _base_element_size(settings)
    quantized: set[str] = set()
    if settings.quantization == "fp8-cast":
        policy = Fp8CastPolicy()
        for name in policy.module_names(model):
            quantized |= {f"{name}.weight", f"{name}.bias"}
    elif settings.quantization is not None:
        quantized = {
            f"{n}.weight"
            for n, m in model.named_modules()
            if isinstance(m, nn.Linear) and n.startswith("transformer_blocks.")
        }
    block_bytes = other_bytes = upcast = 0
    compute_size = 2 if settings.mixed_precision in ("bf16", "fp16") else 4
    for name, tensor in model.state_dict().items():
        if name in quantized:
            size = int(tensor.numel() * QUANTIZED_BYTES_PER_VALUE[settings.quantization])  # type: ignore[index]
        else:
            size = tensor.numel() * base_size
        if name.startswith("transformer_blocks.0."):
            block_bytes += size
            if name in quantized and settings.quantization == "fp8-cast":
                upcast += tensor.numel() * compute_size
        elif not name.startswith("transformer_blocks."):
            other_bytes += size
    trainable = 0
    if settings.lora_rank is not None:
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear) and _is_target(name, settings.lora_targets):
                trainable += settings.lora_rank * (module.in_features + module.out_features)
    with torch.device("meta"):
        connectors = text_connectors_spec(settings.with_audio).configurator(dict(checkpoint_config))
    config = model.config
    return _ModelFacts(
        blocks=model.num_blocks,
        block_bytes=block_bytes,
        other_bytes=other_bytes,
        upcast_bytes=upcast,
        trainable_params=trainable,
        full_params=sum(t.numel() for t in model.state_dict().values()),
        connector_bytes=base_size * sum(p.numel() for p in connectors.parameters()),
        video_dim=config.video.dim if config.video is not None else 0,
        audio_dim=config.audio.dim if config.audio is not None else 0,
    )


def _facts_key(settings: TrainingSettings) -> tuple:
    return (settings.lora_rank, settings.lora_targets, _base_element_size(settings), settings.mixed_precision,
            settings.quantization, settings.with_audio)  # fmt: skip


def _weight_bytes(facts: _ModelFacts, settings: TrainingSettings) -> tuple[int, int, int]:
    """(device base weights, host copies of swapped blocks, trainable parameter count)."""
    swapped = settings.blocks_to_swap
    if not 0 <= swapped < facts.blocks:
        raise ValueError(
            f"acceleration.blocks_to_swap: {swapped} must be between 0 and {facts.blocks - 1} (the model has "
            f"{facts.blocks} blocks; one stays on the device)"
        )
    if settings.lora_rank is None:
        return 0, 0, facts.full_params
    base = facts.other_bytes + (facts.blocks - swapped) * facts.block_bytes  # resident blocks = device slots
    host = 0
    if swapped:
        host = (facts.blocks if settings.swap_source == "ram" else HOST_SWAP_SLOTS) * facts.block_bytes
    return base, host, facts.trainable_params


def _activation_bytes(
    facts: _ModelFacts, settings: TrainingSettings, shape: TrainingShape, on_cpu: bool
) -> tuple[int, int]:
    """(activations on the device, activations offloaded to the host) for one step's batch."""
    widths = []
    if facts.video_dim and shape.video_tokens:
        widths.append((shape.video_tokens, facts.video_dim))
    if facts.audio_dim and shape.audio_tokens:
        widths.append((shape.audio_tokens, facts.audio_dim))
    token_width = sum(t * d for t, d in widths)
    tokens = sum(t for t, _ in widths)
    compute = "bf16" if settings.mixed_precision in ("bf16", "fp16") else "float32"
    text_width = shape.text_tokens * sum(d for _, d in widths)
    per_block = (
        BLOCK_BYTES_PER_TOKEN_WIDTH[compute] * token_width
        + BLOCK_BYTES_PER_TOKEN[compute] * tokens
        + BLOCK_BYTES_PER_TEXT_WIDTH[compute] * text_width
    )
    blocks = facts.blocks
    offloaded = 0
    if settings.gradient_checkpointing:
        kept_inputs = blocks * token_width * 4  # each block's float32 input streams
        if settings.offload_activations and not on_cpu:
            offloaded = kept_inputs * shape.batch
            # The device keeps the recomputed block's input and the block output being copied out.
            kept_inputs = 2 * token_width * 4
        # The recomputed block's upcast fp8 weights are live during its backward pass.
        activations = kept_inputs + per_block + facts.upcast_bytes
    else:
        activations = blocks * (per_block + facts.upcast_bytes)
    return int(activations * shape.batch), offloaded


def estimate_training_memory(
    checkpoint_config: Mapping[str, Any],
    settings: TrainingSettings,
    shape: TrainingShape,
    device: torch.device | str = "cuda",
    *,
    facts: _ModelFacts | None = None,
) -> TrainingMemoryEstimate:
    device = torch.device(device)
    facts = facts if facts is not None else _model_facts(checkpoint_config, settings)
    on_cpu = device.type == "cpu"
    base, host, trainable_params = _weight_bytes(facts, settings)
    moments = 2 if settings.optimizer == "adamw8bit" else 8
    trainable = trainable_params * (4 + 4 + moments)
    activations, offloaded = _activation_bytes(facts, settings, shape, on_cpu)

    from ltx_trainer.training.context_cache import DEFAULT_BUDGET_BYTES, contexts_bytes_per_sample

    kept = shape.samples * contexts_bytes_per_sample(
        shape.text_tokens, facts.video_dim, facts.audio_dim, _base_element_size(settings)
    )
    runtime = CPU_RUNTIME_BYTES + min(kept, DEFAULT_BUDGET_BYTES) if on_cpu else 0
    if on_cpu:  # the host is the device: the swapped blocks' host copies are in the same memory
        base, host = base + host, 0
    return TrainingMemoryEstimate(
        base_weights=base,
        trainable=trainable,
        connectors=facts.connector_bytes,
        activations=activations,
        runtime=runtime,
        trainable_weights=trainable_params * 4,
        connectors_released=kept <= DEFAULT_BUDGET_BYTES,
        host=host + offloaded,
    )


class TrainingMemoryError(ValueError):
    pass


def setting_ladder(settings: TrainingSettings, blocks: int) -> list[TrainingSettings]:
    """The settings to try when `settings` does not fit, fastest first, each keeping what the user chose:
    gradient checkpointing, activation offload, then 1, 2, ... swapped blocks, at each count the bf16
    base before fp8-cast (fp8-cast alone comes before the first swapped block). Optimum-quanto bases
    cannot be swapped: their ladder stops at activation offload."""
    ladder: list[TrainingSettings] = []
    s = settings
    if not s.gradient_checkpointing:
        s = replace(s, gradient_checkpointing=True)
        ladder.append(s)
    if not s.offload_activations:
        s = replace(s, offload_activations=True)
        ladder.append(s)
    if s.lora_rank is None or s.quantization not in (None, "fp8-cast"):
        return ladder
    bases = [s.quantization] if s.quantization == "fp8-cast" else [None, "fp8-cast"]
    for count in range(s.blocks_to_swap, blocks):
        for quantization in bases:
            candidate = replace(s, blocks_to_swap=count, quantization=quantization)
            if candidate != s and candidate not in ladder:
                ladder.append(candidate)
    return ladder


@dataclass
class _Planner:
    """Estimates for one checkpoint config, shape and device, building each model variant once."""

    checkpoint_config: Mapping[str, Any]
    shape: TrainingShape
    device: torch.device | str
    _facts: dict[tuple, _ModelFacts] = field(default_factory=dict)

    def estimate(self, settings: TrainingSettings, shape: TrainingShape | None = None) -> TrainingMemoryEstimate:
        key = _facts_key(settings)
        if key not in self._facts:
            self._facts[key] = _model_facts(self.checkpoint_config, settings)
        return estimate_training_memory(
            self.checkpoint_config, settings, shape or self.shape, self.device, facts=self._facts[key]
        )

    def blocks(self, settings: TrainingSettings) -> int:
        self.estimate(replace(settings, blocks_to_swap=0))
        return self._facts[_facts_key(settings)].blocks

    def first_fitting(
        self, settings: TrainingSettings, budget: int
    ) -> tuple[TrainingSettings, TrainingMemoryEstimate] | None:
        """`settings` when it fits, else the first rung of its ladder that does; None when none does."""
        for candidate in [settings, *setting_ladder(settings, self.blocks(settings))]:
            estimate = self.estimate(candidate)
            if estimate.peak <= budget:
                return candidate, estimate
        return None


def _changes(settings: TrainingSettings, other: TrainingSettings) -> str:
    """`other`'s differences from `settings`, as config lines."""
    lines = []
    if other.gradient_checkpointing and not settings.gradient_checkpointing:
        lines.append("optimization.enable_gradient_checkpointing: true")
    if other.offload_activations and not settings.offload_activations:
        lines.append("acceleration.offload_activations: true")
    if other.quantization != settings.quantization:
        lines.append(f"acceleration.quantization: {other.quantization}")
    if other.blocks_to_swap != settings.blocks_to_swap:
        lines.append(f"acceleration.blocks_to_swap: {other.blocks_to_swap}")
    if other.optimizer != settings.optimizer:
        lines.append(f"optimization.optimizer_type: {other.optimizer}")
    return ", ".join(lines)


def check_training_fits(
    checkpoint_config: Mapping[str, Any],
    settings: TrainingSettings,
    shape: TrainingShape,
    free_bytes: int,
    device: torch.device | str = "cuda",
    headroom: float = 0.05,
) -> TrainingMemoryEstimate:
    """The estimate, or a `TrainingMemoryError` naming it and the first setting that would fit."""
    planner = _Planner(checkpoint_config, shape, device)
    estimate = planner.estimate(settings)
    budget = int(free_bytes * (1 - headroom))
    if estimate.peak <= budget:
        return estimate
    found = planner.first_fitting(settings, budget)
    if found is not None:
        other, fits = found
        advice = f"this would fit: {_changes(settings, other)} ({fits.peak / _GIB:.1f} GiB)"
    else:
        advice = "nothing tried fits (gradient checkpointing, activation offload, block swap, fp8-cast"
        last = ([settings, *setting_ladder(settings, planner.blocks(settings))])[-1]
        for name, smaller in _smaller(last, shape):
            other = planner.estimate(smaller[0], smaller[1])
            if other.peak <= budget:
                advice = f"this would fit: {_changes(settings, smaller[0]) or 'the same settings'} with {name} "
                advice += f"({other.peak / _GIB:.1f} GiB)"
                break
        else:
            advice += ", 8-bit AdamW, 1/4 of the tokens)"
    raise TrainingMemoryError(
        f"this training run needs about {estimate.describe()}, but only {free_bytes / _GIB:.1f} GiB of "
        f"{'RAM' if torch.device(device).type == 'cpu' else 'device memory'} is free (keeping {headroom:.0%} in "
        f"reserve); {advice}"
    )


def _smaller(settings: TrainingSettings, shape: TrainingShape):
    """After the ladder: 8-bit AdamW (CUDA), then fewer tokens."""
    s = replace(settings, optimizer="adamw8bit")
    yield "8-bit AdamW", (s, shape)
    for factor in (2, 4):
        smaller = replace(shape, video_tokens=shape.video_tokens // factor, audio_tokens=shape.audio_tokens // factor)
        yield f"1/{factor} of the tokens (smaller buckets or fewer frames)", (s, smaller)


def resolve_blocks_to_swap(
    checkpoint_config: Mapping[str, Any],
    settings: TrainingSettings,
    shape: TrainingShape,
    free_bytes: int,
    device: torch.device | str = "cuda",
    headroom: float = 0.05,
) -> int:
    """`blocks_to_swap: auto`: the fewest swapped blocks with which `settings` fits, else the plan's error."""
    planner = _Planner(checkpoint_config, shape, device)
    budget = int(free_bytes * (1 - headroom))
    for count in range(planner.blocks(settings)):
        if planner.estimate(replace(settings, blocks_to_swap=count)).peak <= budget:
            return count
    check_training_fits(checkpoint_config, replace(settings, blocks_to_swap=0), shape, free_bytes, device, headroom)
    raise AssertionError("unreachable: check_training_fits raises when nothing fits")


def free_memory(device: torch.device) -> int | None:
    """Free bytes: CUDA's free memory, MemAvailable on a Linux CPU; None where unknown."""
    if device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "cpu":
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
    return None


def settings_of(config: Any) -> TrainingSettings:
    """The memory-relevant settings of an `LtxTrainerConfig`."""
    lora = config.lora if config.model.training_mode == "lora" else None
    acc = config.acceleration
    return TrainingSettings(
        lora_rank=lora.rank if lora is not None else None,
        lora_targets=tuple(lora.target_modules) if lora is not None else (),
        mixed_precision=config.acceleration.mixed_precision_mode,
        quantization=config.acceleration.quantization,
        gradient_checkpointing=config.optimization.enable_gradient_checkpointing,
        optimizer=config.optimization.optimizer_type,
        with_audio=config.training_strategy.audio is not None,
        # 'auto' is resolved by `plan_run` before the trainer builds anything; counted as 0 until then
        blocks_to_swap=acc.blocks_to_swap if isinstance(acc.blocks_to_swap, int) else 0,
        swap_source=acc.block_swap_source,
        offload_activations=acc.offload_activations,
    )


def shape_of_data(
    root: Path, video_dir: str | None, audio_dir: str | None, batch: int, patch: int = 1
) -> TrainingShape:
    """The largest sample's tokens, read from the precomputed files' headers (no tensor is loaded)."""
    from safetensors import safe_open

    from ltx_trainer.preprocessing.precomputed import find_samples

    def largest(folder: str | None, key: str) -> tuple[int, int]:
        if folder is None:
            return 0, 0
        files = [f for f in find_samples(root / folder) if f.suffix == ".safetensors"]
        best = 0
        for f in files[:64]:
            try:
                with safe_open(str(f), framework="pt") as h:
                    if key in h.keys():  # noqa: SIM118 - safe_open is not a mapping
                        dims = h.get_slice(key).get_shape()
                        best = max(best, _tokens(dims))
            except Exception:  # a damaged file is reported by the data loader, naming it
                continue
        return best, len(files)

    video, n = largest(video_dir, "latents")
    audio, m = largest(audio_dir, "latents")
    return TrainingShape(video_tokens=video, audio_tokens=audio, batch=batch, samples=max(n, m, 1))


def _tokens(dims: Sequence[int]) -> int:
    """Tokens of a stored latent: (C, F, H, W) video -> F*H*W; (C, T, M) audio -> T; (T, C) patchified -> T."""
    if len(dims) == 4:
        return dims[1] * dims[2] * dims[3]
    if len(dims) == 3:
        return dims[1]
    return dims[0]


def _run_inputs(config: Any) -> tuple[dict[str, Any], TrainingShape]:
    """The checkpoint's config and the largest sample's shape, from file headers only."""
    from ltx_core.loader import read_checkpoint_config

    checkpoint_config = {"transformer": read_checkpoint_config(config.model.model_path, "transformer")}
    strategy = config.training_strategy
    shape = shape_of_data(
        config.data.preprocessed_data_root,
        strategy.video.latents_dir if strategy.video is not None else None,
        strategy.audio.latents_dir if strategy.audio is not None else None,
        config.optimization.batch_size,
    )
    return checkpoint_config, shape


def check_run(config: Any, device: torch.device) -> TrainingMemoryEstimate | None:
    """Trainer start: estimate the configured run and stop with a clear error when it cannot fit."""
    free = free_memory(device)
    checkpoint_config, shape = _run_inputs(config)
    settings = settings_of(config)
    if free is None:
        estimate_training_memory(checkpoint_config, settings, shape, device)  # a swap count out of range stops
        return None
    if config.acceleration.skip_memory_check:
        estimate = estimate_training_memory(checkpoint_config, settings, shape, device)
        if estimate.peak > free:
            logger.warning(
                "memory plan: this run needs about %s but %.1f GiB are free; starting anyway "
                "(acceleration.skip_memory_check: true)",
                estimate.describe(),
                free / _GIB,
            )
        return estimate
    estimate = check_training_fits(checkpoint_config, settings, shape, free, device)
    logger.debug("memory plan: %s of %.1f GiB free", estimate.describe(), free / _GIB)
    return estimate


def plan_run(config: Any, device: torch.device) -> Any:
    """Trainer start: `config` with `blocks_to_swap: auto` replaced by the fewest blocks that fit, after
    `check_run` (which stops a run that cannot fit, naming the first setting that would)."""
    acc = config.acceleration
    if acc.blocks_to_swap == "auto":
        free = free_memory(device)
        checkpoint_config, shape = _run_inputs(config)
        settings = settings_of(config)
        if free is None:
            count = 0
            logger.warning("acceleration.blocks_to_swap: auto: the free memory of %s is unknown; swapping none", device)
        elif acc.skip_memory_check:
            try:
                count = resolve_blocks_to_swap(checkpoint_config, settings, shape, free, device)
            except TrainingMemoryError:
                count = _Planner(checkpoint_config, shape, device).blocks(settings) - 1
        else:
            count = resolve_blocks_to_swap(checkpoint_config, settings, shape, free, device)
        logger.info("acceleration.blocks_to_swap: auto -> %d (memory plan)", count)
        config = config.model_copy(update={"acceleration": acc.model_copy(update={"blocks_to_swap": count})})
    check_run(config, device)
    return config
