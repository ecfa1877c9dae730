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
- on the CPU, the process itself (the Python runtime and the trainer's libraries, `CPU_RUNTIME_BYTES`).

The peak is the larger of the start (connectors running) and a training step. On the CPU the measured
peak RSS follows the estimate because the trainer fixes glibc's mmap threshold (`training.host_memory`):
with glibc's moving threshold freed activations stay in the heaps and the peak RSS grew past the estimate
by a share of the activations, up to a fifth at 1056 tokens (benchmarks/trainer_memory_plan.py). On CUDA
the estimate assumes a fused SDPA kernel (flash or memory-efficient: no token x token score matrix) and
counts no caching-allocator slack.

`check_training_fits` compares the peak with the device's free memory (available RAM on the CPU) and,
when it does not fit, raises an error naming the settings that would.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltx_core.model.transformer import configure_transformer

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
}


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
            f"{self.activations / _GIB:.1f}, runtime {self.runtime / _GIB:.1f} GiB)"
        )


def _is_target(name: str, targets: Sequence[str]) -> bool:
    return any(name == t or name.endswith("." + t) for t in targets)


def _base_element_size(settings: TrainingSettings) -> int:
    """Bytes per value of the frozen base and connectors: bf16 under bf16 LoRA, else float32 (training/build.py)."""
    return 2 if settings.lora_rank is not None and settings.mixed_precision == "bf16" else 4


def _weight_bytes(model: nn.Module, settings: TrainingSettings) -> tuple[int, int]:
    """(frozen base bytes, trainable parameter count)."""
    lora = settings.lora_rank is not None
    base_size = _base_element_size(settings)
    quantized: set[str] = set()
    if settings.quantization is not None:
        quantized = {
            f"{n}.weight"
            for n, m in model.named_modules()
            if isinstance(m, nn.Linear) and n.startswith("transformer_blocks.")
        }
    base, trainable = 0, 0
    for name, tensor in model.state_dict().items():
        if name in quantized:
            base += int(tensor.numel() * QUANTIZED_BYTES_PER_VALUE[settings.quantization])  # type: ignore[index]
        else:
            base += tensor.numel() * base_size
    if not lora:
        return 0, sum(t.numel() for t in model.state_dict().values())
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and _is_target(name, settings.lora_targets):
            trainable += settings.lora_rank * (module.in_features + module.out_features)  # type: ignore[operator]
    return base, trainable


def estimate_training_memory(
    checkpoint_config: Mapping[str, Any],
    settings: TrainingSettings,
    shape: TrainingShape,
    device: torch.device | str = "cuda",
) -> TrainingMemoryEstimate:
    device = torch.device(device)
    with torch.device("meta"):
        model = configure_transformer(checkpoint_config)
    config = model.config
    base, trainable_params = _weight_bytes(model, settings)
    moments = 2 if settings.optimizer == "adamw8bit" else 8
    trainable = trainable_params * (4 + 4 + moments)

    # The connectors are about the size of their share of the checkpoint; counted from the config.
    from ltx_trainer.training.text_contexts import text_connectors_spec

    with torch.device("meta"):
        connectors = text_connectors_spec(settings.with_audio).configurator(dict(checkpoint_config))
    connector_bytes = _base_element_size(settings) * sum(p.numel() for p in connectors.parameters())

    widths = []
    if config.video is not None and shape.video_tokens:
        widths.append((shape.video_tokens, config.video.dim))
    if config.audio is not None and shape.audio_tokens:
        widths.append((shape.audio_tokens, config.audio.dim))
    token_width = sum(t * d for t, d in widths)
    tokens = sum(t for t, _ in widths)
    compute = "bf16" if settings.mixed_precision in ("bf16", "fp16") else "float32"
    text_width = shape.text_tokens * sum(d for _, d in widths)
    per_block = (
        BLOCK_BYTES_PER_TOKEN_WIDTH[compute] * token_width
        + BLOCK_BYTES_PER_TOKEN[compute] * tokens
        + BLOCK_BYTES_PER_TEXT_WIDTH[compute] * text_width
    )
    blocks = model.num_blocks
    if settings.gradient_checkpointing:
        activations = blocks * token_width * 4 + per_block
    else:
        activations = blocks * per_block
    activations = int(activations * shape.batch)

    from ltx_trainer.training.context_cache import DEFAULT_BUDGET_BYTES, contexts_bytes_per_sample

    dims = [config.video.dim if config.video else 0, config.audio.dim if config.audio else 0]
    kept = shape.samples * contexts_bytes_per_sample(shape.text_tokens, *dims, _base_element_size(settings))
    runtime = CPU_RUNTIME_BYTES + min(kept, DEFAULT_BUDGET_BYTES) if device.type == "cpu" else 0
    return TrainingMemoryEstimate(
        base_weights=base,
        trainable=trainable,
        connectors=connector_bytes,
        activations=activations,
        runtime=runtime,
        trainable_weights=trainable_params * 4,
        connectors_released=kept <= DEFAULT_BUDGET_BYTES,
    )


class TrainingMemoryError(ValueError):
    pass


def _alternatives(
    settings: TrainingSettings, shape: TrainingShape
) -> list[tuple[str, TrainingSettings, TrainingShape]]:
    """Changes that lower memory, cheapest in quality first, each stacked on the ones before."""
    steps: list[tuple[str, TrainingSettings, TrainingShape]] = []
    s, names = settings, []
    for name, changed in (
        ("optimization.enable_gradient_checkpointing: true", replace(s, gradient_checkpointing=True)),
        ("acceleration.quantization: int8-quanto", replace(s, quantization=s.quantization or "int8-quanto")),
        ("optimization.optimizer_type: adamw8bit", replace(s, optimizer="adamw8bit")),
    ):
        merged = replace(
            s,
            gradient_checkpointing=s.gradient_checkpointing or changed.gradient_checkpointing,
            quantization=s.quantization or changed.quantization,
            optimizer="adamw8bit" if "adamw8bit" in (s.optimizer, changed.optimizer) else s.optimizer,
        )
        if merged == s:
            continue
        s = merged
        names.append(name)
        steps.append((", ".join(names), s, shape))
    for factor in (2, 4):
        smaller = replace(shape, video_tokens=shape.video_tokens // factor, audio_tokens=shape.audio_tokens // factor)
        steps.append((", ".join([*names, f"1/{factor} of the tokens (smaller buckets or fewer frames)"]), s, smaller))
    return steps


def check_training_fits(
    checkpoint_config: Mapping[str, Any],
    settings: TrainingSettings,
    shape: TrainingShape,
    free_bytes: int,
    device: torch.device | str = "cuda",
    headroom: float = 0.05,
) -> TrainingMemoryEstimate:
    """The estimate, or a `TrainingMemoryError` naming it and the settings that would fit."""
    estimate = estimate_training_memory(checkpoint_config, settings, shape, device)
    budget = int(free_bytes * (1 - headroom))
    if estimate.peak <= budget:
        return estimate
    advice = "nothing tried fits (gradient checkpointing, int8-quanto, 8-bit AdamW, 1/4 of the tokens)"
    for name, s, sh in _alternatives(settings, shape):
        other = estimate_training_memory(checkpoint_config, s, sh, device)
        if other.peak <= budget:
            advice = f"this would fit: {name} ({other.peak / _GIB:.1f} GiB)"
            break
    raise TrainingMemoryError(
        f"this training run needs about {estimate.describe()}, but only {free_bytes / _GIB:.1f} GiB of "
        f"{'RAM' if torch.device(device).type == 'cpu' else 'device memory'} is free (keeping {headroom:.0%} in "
        f"reserve); {advice}"
    )


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
    return TrainingSettings(
        lora_rank=lora.rank if lora is not None else None,
        lora_targets=tuple(lora.target_modules) if lora is not None else (),
        mixed_precision=config.acceleration.mixed_precision_mode,
        quantization=config.acceleration.quantization,
        gradient_checkpointing=config.optimization.enable_gradient_checkpointing,
        optimizer=config.optimization.optimizer_type,
        with_audio=config.training_strategy.audio is not None,
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


def check_run(config: Any, device: torch.device) -> TrainingMemoryEstimate | None:
    """Trainer start: estimate the configured run and stop with a clear error when it cannot fit."""
    from ltx_core.loader import read_checkpoint_config

    free = free_memory(device)
    checkpoint_config = {"transformer": read_checkpoint_config(config.model.model_path, "transformer")}
    strategy = config.training_strategy
    shape = shape_of_data(
        config.data.preprocessed_data_root,
        strategy.video.latents_dir if strategy.video is not None else None,
        strategy.audio.latents_dir if strategy.audio is not None else None,
        config.optimization.batch_size,
    )
    settings = settings_of(config)
    if free is None:
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
