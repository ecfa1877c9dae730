"""Building a training run: devices and processes (accelerate), the transformer with its adapters, the
frozen text connectors, the optimizer, the LR schedule, the strategy and the data. `build_parts` does it
in that order and returns the pieces the step and the hooks use."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs
from safetensors import safe_open
from tqdm import tqdm

from ltx_core.loader import build_model
from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER, AV_TRANSFORMER, VIDEO_ONLY_TRANSFORMER, LTXModel
from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit
from ltx_core.tune import KernelChoices
from ltx_core.tune.matmul import matmul_path
from ltx_trainer.config import FlexibleStrategyConfig, LtxTrainerConfig, MaskCondition, ReferenceCondition
from ltx_trainer.model_files import video_compression
from ltx_trainer.training.activation_offload import enable_activation_offload
from ltx_trainer.training.block_swap import adapter_stand_ins, build_frozen_base, uses_runtime_base
from ltx_trainer.training.context_cache import CachedTextContexts
from ltx_trainer.training.data import BatchOrder, PrecomputedTrainingData, audio_only_source
from ltx_trainer.training.flexible import FlexibleStrategy, ReferenceScale
from ltx_trainer.training.host_memory import fix_mmap_threshold
from ltx_trainer.training.lora_files import add_lora
from ltx_trainer.training.lr_schedules import make_lr_scheduler
from ltx_trainer.training.quantization import (
    QUANTO_WEIGHT_TYPES,
    QuantizedTransformer,
    check_quantization_device,
    quantize_transformer,
    require_quanto,
)
from ltx_trainer.training.text_contexts import TextConnectors, text_connectors_spec
from ltx_trainer.training.timesteps import make_sampler

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingParts:
    """Everything a step and the hooks work on. `model` is what accelerate prepared (DDP-wrapped under
    several processes); `unwrapped` the peft (or plain) transformer inside it."""

    config: LtxTrainerConfig
    accelerator: Accelerator
    model: torch.nn.Module
    unwrapped: torch.nn.Module
    base_dtype: torch.dtype
    quantized: QuantizedTransformer | None
    context_cache: CachedTextContexts  # holds the text connectors until every sample's contexts are kept
    trainable: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    strategy: FlexibleStrategy
    reference_scale: ReferenceScale
    dataset: PrecomputedTrainingData
    order: BatchOrder

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    @property
    def output_dir(self) -> Path:
        return self.config.output_dir

    @property
    def checkpoint_dir(self) -> Path:
        return self.config.output_dir / "checkpoints"

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process


def make_accelerator(config: LtxTrainerConfig) -> Accelerator:
    """accelerate's devices and processes, after the checks that need only the device."""
    acc = config.acceleration
    if config.optimization.optimizer_type == "adamw8bit":
        _check_bnb()
    accelerator = Accelerator(
        mixed_precision=acc.mixed_precision_mode,
        cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )
    if acc.quantization is not None:
        # Before any weight is read: the extra must be installed and the type must run on this device.
        if acc.quantization != "fp8-cast":  # fp8-cast is ltx_core's, no extra
            require_quanto(acc.quantization)
        check_quantization_device(acc.quantization, accelerator.device)
    if acc.load_text_encoder_in_8bit:
        require_gemma_8bit(accelerator.device, "acceleration.load_text_encoder_in_8bit")
        if config.validation.interval is None or not config.validation.samples:
            logger.warning("acceleration.load_text_encoder_in_8bit: no effect, validation sampling is off")
    return accelerator


def build_parts(config: LtxTrainerConfig, accelerator: Accelerator, *, progress: bool) -> TrainingParts:
    strategy_cfg = config.training_strategy
    ref_scale = ReferenceScale()
    if strategy_cfg.video is not None:
        for c in strategy_cfg.video.conditions:
            if isinstance(c, ReferenceCondition):
                ref_scale = reference_scale_from_data(config.data.preprocessed_data_root, c.latents_dir)
    sampler = make_sampler(config.flow_matching.timestep_sampling_mode, config.flow_matching.timestep_sampling_params)
    # The VAE's compression, from the video VAE file's metadata (LTX-2.5 split set) or the single file's.
    scale, _ = video_compression(config.model.model_path, config.model.video_vae_path)
    strategy = FlexibleStrategy(strategy_cfg, sampler, scale, ref_scale)
    dataset = PrecomputedTrainingData(
        config.data.preprocessed_data_root,
        strategy_cfg.data_sources(),
        _required_tensors(strategy_cfg),
        require_audio_in=audio_only_source(strategy_cfg),
    )
    order = BatchOrder(
        len(dataset), config.optimization.batch_size, config.seed, accelerator.process_index,
        accelerator.num_processes,
    )  # fmt: skip
    return _build_models(config, accelerator, strategy, ref_scale, dataset, order, progress=progress)


def _base_dtype(cfg: LtxTrainerConfig) -> torch.dtype:
    """The frozen base's storage dtype.

    LoRA under bf16 autocast keeps the frozen base in bf16 (the released dtype) on every device:
    autocast runs the base matmuls in bf16 anyway, so float32 storage only adds a cast per call
    and twice the memory (benchmarks/trainer_bf16_step.py). Full training keeps float32 masters.
    (A quantized base needs it too: quanto's CPU int8 kernel takes bf16 activations only with bf16 scales.)
    """
    bf16_base = cfg.model.training_mode == "lora" and cfg.acceleration.mixed_precision_mode == "bf16"
    return torch.bfloat16 if bf16_base else torch.float32


def _frozen_base(
    cfg: LtxTrainerConfig, device: torch.device, base_dtype: torch.dtype, *, progress: bool
) -> tuple[LTXModel, QuantizedTransformer | None]:
    """The transformer to train on (block-swapped / fp8-cast, or built whole and quanto-quantized) and the
    quantization record (None when quanto does not quantize it)."""
    acc = cfg.acceleration
    quantization = acc.quantization if acc.quantization in QUANTO_WEIGHT_TYPES else None
    # -- block swap / fp8-cast base (training/block_swap.py); blocks_to_swap 'auto' was resolved by the plan --
    swap = acc.blocks_to_swap if isinstance(acc.blocks_to_swap, int) else 0
    if uses_runtime_base(swap, acc.quantization):
        model: LTXModel = build_frozen_base(
            transformer_spec(cfg), cfg.model.model_path, device=device, dtype=base_dtype, blocks_to_swap=swap,
            swap_source=acc.block_swap_source, quantization=acc.quantization,
            checkpointing=cfg.optimization.enable_gradient_checkpointing,
        )  # fmt: skip
    else:
        # A quantized run builds the model in host memory and quantizes it block by block onto the
        # device, so the device never holds the whole full-precision model.
        model = build_model(
            transformer_spec(cfg), cfg.model.model_path, dtype=base_dtype,
            device=torch.device("cpu") if quantization else device,
        )  # fmt: skip
    if device.type == "cpu" and acc.mixed_precision_mode == "bf16":
        warn_if_bf16_matmul_is_slow(model)
    quantized = quantize_transformer(model, quantization, device, progress=progress) if quantization else None
    return model, quantized


def _build_models(
    cfg: LtxTrainerConfig,
    accelerator: Accelerator,
    strategy: FlexibleStrategy,
    ref_scale: ReferenceScale,
    dataset: PrecomputedTrainingData,
    order: BatchOrder,
    *,
    progress: bool,
) -> TrainingParts:
    device = accelerator.device
    if device.type == "cpu":
        # Freed activations go back to the system instead of fragmenting glibc's heaps (training/host_memory.py).
        fix_mmap_threshold()
    base_dtype = _base_dtype(cfg)
    torch.manual_seed(cfg.seed)
    model, quantized = _frozen_base(cfg, device, base_dtype, progress=progress)
    # The frozen connectors follow the base: bf16 under bf16 LoRA (half the device memory; they run once
    # per sample, see CachedTextContexts), float32 otherwise (the golden parity runs in float32).
    connectors: TextConnectors = build_model(
        text_connectors_spec(cfg.training_strategy.audio is not None), cfg.model.model_path,
        dtype=base_dtype, device=device,
    )  # fmt: skip
    model.set_gradient_checkpointing(cfg.optimization.enable_gradient_checkpointing)
    enable_activation_offload(model, cfg.acceleration.offload_activations)  # training/activation_offload.py
    trained = _with_trainable_weights(model, cfg, base_dtype, device)
    trainable = [p for p in trained.parameters() if p.requires_grad]
    opt = cfg.optimization
    optimizer = _make_optimizer(opt.optimizer_type, trainable, opt.learning_rate)
    # The scheduler is deliberately not passed to accelerate (see lr_schedules).
    scheduler = make_lr_scheduler(optimizer, opt.scheduler_type, opt.steps, opt.scheduler_params)
    prepared, optimizer = accelerator.prepare(trained, optimizer)
    # Every sample's contexts before the first step, then the connectors go (when the contexts fit the cache).
    cache = CachedTextContexts(connectors)
    del connectors
    precompute_text_contexts(cache, dataset, device, base_dtype, progress=progress and accelerator.is_main_process)
    return TrainingParts(
        config=cfg, accelerator=accelerator, model=prepared, unwrapped=accelerator.unwrap_model(prepared),
        base_dtype=base_dtype, quantized=quantized, trainable=trainable, context_cache=cache,
        optimizer=optimizer, scheduler=scheduler, strategy=strategy, reference_scale=ref_scale,
        dataset=dataset, order=order,
    )  # fmt: skip


def _with_trainable_weights(
    model: LTXModel, cfg: LtxTrainerConfig, base_dtype: torch.dtype, device: torch.device
) -> torch.nn.Module:
    """LoRA: the peft model with float32 adapters over the frozen base; full training: the model itself, all
    of it trained. In training mode either way."""
    if cfg.model.training_mode == "lora":
        lora = cfg.lora
        assert lora is not None
        with adapter_stand_ins(model, base_dtype, device):  # streamed / float8 block weights (block_swap.py)
            trained = add_lora(model, lora.rank, lora.alpha, lora.dropout, lora.target_modules)
        for p in trained.parameters():
            if p.requires_grad:
                p.data = p.data.float()
    else:
        model.requires_grad_(True)
        trained = model
    trained.train()
    return trained


def _make_optimizer(kind: str, trainable: list[torch.nn.Parameter], learning_rate: float) -> torch.optim.Optimizer:
    if kind == "adamw8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(trainable, lr=learning_rate)
    return torch.optim.AdamW(trainable, lr=learning_rate)


def text_features_on(
    text: dict[str, torch.Tensor], device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(video features, audio features or None, mask) of a conditions/ batch, as the connectors take them."""
    audio = text["audio_prompt_embeds"].to(device, dtype) if "audio_prompt_embeds" in text else None
    return text["video_prompt_embeds"].to(device, dtype), audio, text["prompt_attention_mask"].to(device)


def precompute_text_contexts(
    cache: CachedTextContexts, dataset: PrecomputedTrainingData, device: torch.device, dtype: torch.dtype,
    *, progress: bool,
) -> bool:  # fmt: skip
    """Run the connectors over every sample once, so that the cache can release them; False when the
    contexts outgrow the cache (the loop then runs the connectors for the samples left)."""

    def samples():
        for index in tqdm(range(len(dataset)), desc="text contexts", disable=not progress):
            features = text_features_on(dataset.text_features(index), device, dtype)
            yield index, *(None if t is None else t.unsqueeze(0) for t in features)

    return cache.precompute(samples(), len(dataset))


def warn_if_bf16_matmul_is_slow(model: torch.nn.Module, tokens: int = 1024) -> bool:
    """Time the model's widest Linear in bf16 and float32 on this CPU once (this machine's kernel choices,
    `ltx_core.tune`); warn, and return True, when bf16 is the slower (an AVX2 CPU without AVX512-BF16/AMX:
    ~8x there, benchmarks/trainer_bf16_step.py --matmul)."""
    widest = max(
        (m for m in model.modules() if isinstance(m, torch.nn.Linear)), key=lambda m: m.in_features * m.out_features
    )
    choices = KernelChoices.load()
    if matmul_path(choices, widest.in_features, widest.out_features, tokens, torch.bfloat16) == "native":
        return False
    logger.warning(
        "bf16 matmuls measured slower than float32 on this CPU: bf16 autocast steps run slower than "
        "acceleration.mixed_precision_mode: no"
    )
    return True


def _required_tensors(strategy: FlexibleStrategyConfig) -> dict[str, list[str]]:
    """The tensor each source folder's files must hold for the strategy (conditions/ is checked apart)."""
    required: dict[str, list[str]] = {}
    for m in (strategy.video, strategy.audio):
        if m is None:
            continue
        required[m.latents_dir] = ["latents"]
        for c in m.conditions:
            if isinstance(c, MaskCondition):
                required[c.mask_dir] = ["mask"]
            elif isinstance(c, ReferenceCondition):
                required[c.latents_dir] = ["latents"]
    return required


def transformer_spec(config: LtxTrainerConfig):
    """The transformer variant the strategy needs (a video-only run builds no audio blocks)."""
    strategy = config.training_strategy
    if strategy.video is not None and strategy.audio is not None:
        return AV_TRANSFORMER
    return VIDEO_ONLY_TRANSFORMER if strategy.video is not None else AUDIO_ONLY_TRANSFORMER


def reference_scale_from_data(root: Path, latents_dir: str) -> ReferenceScale:
    """Factors recorded by preprocessing in the reference latents' metadata (never searched for in the cwd)."""
    from ltx_trainer.preprocessing.precomputed import find_samples, read_manifest

    files = find_samples(root / latents_dir)
    if files and files[0].suffix == ".safetensors":
        with safe_open(str(files[0]), framework="pt") as f:
            meta = f.metadata() or {}
        if "reference_downscale_factor" in meta:
            return ReferenceScale(
                spatial=int(json.loads(meta["reference_downscale_factor"])),
                temporal=int(json.loads(meta.get("reference_temporal_scale_factor", "1"))),
            )
    manifest = read_manifest(root) or {}
    return ReferenceScale(
        spatial=int(manifest.get("reference_downscale_factor", 1)),
        temporal=int(manifest.get("reference_temporal_scale_factor", 1)),
    )


def _check_bnb() -> None:
    if not torch.cuda.is_available():
        raise ValueError(
            "optimization.optimizer_type 'adamw8bit' needs CUDA (bitsandbytes); use 'adamw' on this machine"
        )
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise ValueError(
            "optimization.optimizer_type 'adamw8bit' needs bitsandbytes: pip install 'ltx-trainer[bnb]'"
        ) from None
