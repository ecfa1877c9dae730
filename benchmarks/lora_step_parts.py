"""What the trainer benchmarks' LoRA step runs on, built once for all of them (`trainer_memory_plan.py`,
`trainer_block_swap.py`, `trainer_vs_reference.py`): the optimizer over the trainable parameters, the flexible
strategy, a random batch at a latent size and its text contexts cached the way the trainer's start caches them
(then the connectors go), and the step itself."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0")
RANK = 64
AUDIO_STEPS = 32
TEXT_TOKENS = 1024


@dataclass
class LoraStep:
    """A model with its LoRA and everything one training step feeds it."""

    model: Any
    optimizer: Any
    strategy: Any
    batch: dict[str, Any]
    cache: Any
    features: tuple[Any, Any]
    mask: Any
    bf16_autocast: bool = False

    def step(self, index: int) -> Any:
        """Training step `index` (its draws depend on it); returns the loss, detached."""
        import torch

        from ltx_trainer.training.draws import PerSampleDraws
        from ltx_trainer.training.flexible import strategy_loss

        contexts = self.cache(*self.features, self.mask, [0])
        inputs = self.strategy.prepare(self.batch, contexts, PerSampleDraws(0, index, [0]))
        with torch.autocast("cpu", torch.bfloat16, enabled=self.bf16_autocast):
            video, audio = self.model(inputs.video.modality, inputs.audio.modality)
        loss = strategy_loss(inputs, video, audio).mean()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def run(self, steps: int) -> tuple[list[float], list[float]]:
        """`steps` training steps: each one's seconds and loss."""
        times, losses = [], []
        for index in range(steps):
            began = time.perf_counter()
            losses.append(float(self.step(index)))
            times.append(time.perf_counter() - began)
        return times, losses


def optimizer_and_strategy(model: Any) -> tuple[Any, Any]:
    """`model` put in training mode, an AdamW over what trains, and the flexible strategy (both streams)."""
    import torch

    from ltx_trainer.config import FlexibleStrategyConfig, ModalityConfig
    from ltx_trainer.training.flexible import FlexibleStrategy
    from ltx_trainer.training.timesteps import ShiftedLogitNormalSampler

    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    strategy = FlexibleStrategy(
        FlexibleStrategyConfig(video=ModalityConfig(latents_dir="v"), audio=ModalityConfig(latents_dir="a")),
        ShiftedLogitNormalSampler(),
    )
    return optimizer, strategy


def cached_contexts(connectors: Any, features: tuple[Any, Any], mask: Any) -> Any:
    """The trainer's start: the sample's contexts computed once, then the connectors go (the cache keeps only
    contexts)."""
    from ltx_trainer.training.context_cache import CachedTextContexts

    cache = CachedTextContexts(connectors)
    if not cache.precompute([(0, *features, mask)], 1):
        raise SystemExit("the contexts did not fit the cache")
    return cache


def lora_step(model: Any, config: dict[str, Any], frames: int, size: int) -> LoraStep:
    """`model` (its LoRA added) in training mode with an AdamW over what trains, the strategy, a batch of
    `frames` x `size` x `size` latents and the contexts of one 1024-token prompt, cached."""
    import torch

    from ltx_trainer.training.text_contexts import text_connectors_spec

    optimizer, strategy = optimizer_and_strategy(model)
    tr = config["transformer"]
    g = torch.Generator().manual_seed(1)
    batch = {
        "v": {"latents": torch.randn(1, 128, frames, size, size, generator=g), "fps": torch.full((1,), 24.0)},
        "a": {"latents": torch.randn(1, 8, AUDIO_STEPS, 16, generator=g)},
    }
    video_width = tr["connector_num_attention_heads"] * tr["connector_attention_head_dim"]
    audio_width = tr["audio_connector_num_attention_heads"] * tr["audio_connector_attention_head_dim"]
    features = (torch.randn(1, TEXT_TOKENS, video_width), torch.randn(1, TEXT_TOKENS, audio_width))
    mask = (torch.arange(TEXT_TOKENS) < 200).long()[None]
    connectors = text_connectors_spec(True).configurator(config).requires_grad_(False).eval()
    cache = cached_contexts(connectors, features, mask)
    return LoraStep(model, optimizer, strategy, batch, cache, features, mask)
