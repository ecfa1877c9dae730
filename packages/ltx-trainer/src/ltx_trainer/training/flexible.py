"""The `flexible` training strategy: one batch of precomputed latents -> transformer inputs, targets, loss.

Per modality (video first, then audio), with patch size 1 tokens:
- generated: sigma from the timestep sampler, eps ~ N(0, 1), x_t = (1 - sigma) x0 + sigma eps, target
  eps - x0, every token at timestep sigma and in the loss;
- frozen (`is_generated: false`): clean tokens, timestep and sigma 0, no target, no loss.
Intrinsic conditions (first_frame, prefix, suffix, spatial_crop, mask) each draw a per-sample Bernoulli
and make their tokens clean, timestep 0 and loss-free. Reference conditions come after them: one
batch-wide draw prepends the clean reference tokens (timestep 0, no loss). The loss of a modality is a
per-sample masked MSE over its target tokens; modality losses are summed.

Every random number comes from a `Draws` object by name, so the parity test can replay the
reference's draws and training can restore its generator on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ltx_core.components.patchifiers import AudioPatchifier, VideoPatchifier
from ltx_core.model.transformer import Modality
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import DEFAULT_SCALE_FACTORS, AudioLatentShape, SpatioTemporalScaleFactors, VideoLatentShape
from ltx_trainer.config import (
    FirstFrameCondition,
    FlexibleStrategyConfig,
    MaskCondition,
    ModalityConfig,
    PrefixCondition,
    ReferenceCondition,
    SpatialCropCondition,
    SuffixCondition,
)
from ltx_trainer.preprocessing.precomputed import HAS_AUDIO
from ltx_trainer.training.draws import Draws
from ltx_trainer.training.timesteps import TimestepSampler

DEFAULT_FPS = 24.0
LOSS_MASK_FLOOR = 1e-8

Batch = Mapping[str, Mapping[str, torch.Tensor]]
"""Data source folder (`latents`, `audio_latents`, `conditions`, `reference_latents`, ...) -> stacked tensors."""


@dataclass(frozen=True)
class ReferenceScale:
    """Spatial (s) and temporal (S) factors of downscaled video references (1 = same grid as the target)."""

    spatial: int = 1
    temporal: int = 1


@dataclass(frozen=True)
class ModalityInputs:
    modality: Modality
    targets: torch.Tensor | None
    """eps - x0 over the target tokens (B, N, C); None for a frozen modality."""
    loss_mask: torch.Tensor
    """(B, T) bool over all tokens, reference tokens included (always False)."""

    @property
    def generated(self) -> bool:
        return self.targets is not None


@dataclass(frozen=True)
class StepInputs:
    video: ModalityInputs | None
    audio: ModalityInputs | None

    @property
    def sigma(self) -> torch.Tensor:
        """The per-sample sigma reported for sigma-bucket logging (video's whenever video is present)."""
        return (self.video or self.audio).modality.sigma  # type: ignore[union-attr]


def masked_mse(prediction: torch.Tensor, targets: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Per-sample mean(err^2 * m) / max(mean(m), 1e-8) over the last len(targets) tokens -> (B,)."""
    n = targets.shape[1]
    pred = prediction[:, -n:]
    mask = loss_mask[:, -n:].to(pred.dtype).unsqueeze(-1).expand_as(pred)
    err = (pred.float() - targets.float()) ** 2
    per_sample = (err * mask).mean(dim=(1, 2))
    return per_sample / mask.float().mean(dim=(1, 2)).clamp(min=LOSS_MASK_FLOOR)


def strategy_loss(inputs: StepInputs, video_pred: torch.Tensor | None, audio_pred: torch.Tensor | None) -> torch.Tensor:
    """Sum over generated modalities of the per-sample masked MSE -> (B,)."""
    total: torch.Tensor | None = None
    for part, pred in ((inputs.video, video_pred), (inputs.audio, audio_pred)):
        if part is None or not part.generated:
            continue
        if pred is None:
            raise ValueError("the transformer returned no prediction for a generated modality")
        loss = masked_mse(pred, part.targets, part.loss_mask)  # type: ignore[arg-type]
        total = loss if total is None else total + loss
    if total is None:
        raise ValueError("no generated modality in this step")
    return total


class FlexibleStrategy:
    def __init__(
        self,
        config: FlexibleStrategyConfig,
        sampler: TimestepSampler,
        video_scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS,
        reference_scale: ReferenceScale = ReferenceScale(),
    ) -> None:
        self.config = config
        self.sampler = sampler
        self.video_scale = video_scale
        self.reference_scale = reference_scale
        self.video_patchifier = VideoPatchifier()
        self.audio_patchifier = AudioPatchifier()

    # -- public ------------------------------------------------------------------------------------
    def prepare(self, batch: Batch, contexts: TextContexts, draws: Draws) -> StepInputs:
        video = self._video(batch, contexts, draws) if self.config.video is not None else None
        audio = self._audio(batch, contexts, draws) if self.config.audio is not None else None
        return StepInputs(video=video, audio=audio)

    # -- video ---------------------------------------------------------------------------------------
    def _video_positions(self, latents: torch.Tensor, fps: float) -> torch.Tensor:
        b, c, f, h, w = latents.shape
        shape = VideoLatentShape(batch=b, channels=c, frames=f, height=h, width=w)
        return self.video_patchifier.positions(shape, fps, self.video_scale, True, latents.device)

    def _video(self, batch: Batch, contexts: TextContexts, draws: Draws) -> ModalityInputs:
        cfg: ModalityConfig = self.config.video  # type: ignore[assignment]
        source = batch[cfg.latents_dir]
        x0_grid = source["latents"].float()
        b, _, f, h, w = x0_grid.shape
        fps = _fps(source)
        x0 = self.video_patchifier.patchify(x0_grid)
        positions = self._video_positions(x0_grid, fps)

        def token_mask(condition) -> torch.Tensor:
            per_frame = h * w
            n = f * per_frame
            m = torch.zeros(b, n, dtype=torch.bool, device=x0.device)
            if isinstance(condition, FirstFrameCondition):
                m[:, :per_frame] = True
            elif isinstance(condition, PrefixCondition):
                m[:, : min(condition.temporal_boundary, f) * per_frame] = True
            elif isinstance(condition, SuffixCondition):
                m[:, n - min(condition.temporal_boundary, f) * per_frame :] = True
            elif isinstance(condition, SpatialCropCondition):
                y1, x1, y2, x2 = condition.spatial_region
                sh, sw = self.video_scale.height, self.video_scale.width
                grid = torch.zeros(h, w, dtype=torch.bool, device=x0.device)
                grid[min(y1 // sh, h) : min(y2 // sh, h), min(x1 // sw, w) : min(x2 // sw, w)] = True
                m = grid.reshape(1, 1, h * w).expand(b, f, -1).reshape(b, n).clone()
            elif isinstance(condition, MaskCondition):
                mask = batch[condition.mask_dir]["mask"]
                if tuple(mask.shape[1:]) != (f, h, w):
                    raise ValueError(
                        f"video mask from {condition.mask_dir!r} has grid {tuple(mask.shape[1:])}, "
                        f"the latents have {(f, h, w)}"
                    )
                m = (mask.reshape(b, n) > 0.5).to(x0.device)
            else:  # pragma: no cover - the config only admits the types above
                raise TypeError(f"unknown video condition {condition!r}")
            return m

        def reference_tokens(condition: ReferenceCondition) -> tuple[torch.Tensor, torch.Tensor]:
            ref = batch[condition.latents_dir]
            ref_grid = ref["latents"].float()
            ref_positions = self._video_positions(ref_grid, _fps(ref, fps))
            scale = self.reference_scale
            if scale.spatial != 1 or scale.temporal != 1:
                first_token_end = positions[:, 0:1, 0:1, 1:2]
                time = (ref_positions[:, 0:1] - (scale.temporal - 1) * first_token_end).clamp(min=0)
                space = ref_positions[:, 1:] * scale.spatial
                ref_positions = torch.cat([time, space], dim=1)
            return self.video_patchifier.patchify(ref_grid), ref_positions

        return self._modality(
            "video", cfg, x0, positions, contexts.video, contexts.mask, draws, token_mask, reference_tokens
        )

    # -- audio ---------------------------------------------------------------------------------------
    def _audio_positions(self, latents: torch.Tensor) -> torch.Tensor:
        b, c, t, m = latents.shape
        shape = AudioLatentShape(batch=b, channels=c, frames=t, mel_bins=m)
        return self.audio_patchifier.positions(shape, latents.device)

    def _audio(self, batch: Batch, contexts: TextContexts, draws: Draws) -> ModalityInputs:
        cfg: ModalityConfig = self.config.audio  # type: ignore[assignment]
        x0_grid = batch[cfg.latents_dir]["latents"].float()
        b, _, t, _ = x0_grid.shape
        x0 = self.audio_patchifier.patchify(x0_grid)
        positions = self._audio_positions(x0_grid)
        if contexts.audio is None:
            raise ValueError("audio is configured but the text stage produced no audio context")

        def token_mask(condition) -> torch.Tensor:
            m = torch.zeros(b, t, dtype=torch.bool, device=x0.device)
            if isinstance(condition, PrefixCondition):
                m[:, : min(condition.temporal_boundary, t)] = True
            elif isinstance(condition, SuffixCondition):
                m[:, t - min(condition.temporal_boundary, t) :] = True
            elif isinstance(condition, MaskCondition):
                mask = batch[condition.mask_dir]["mask"]
                if tuple(mask.shape[1:]) != (t,):
                    raise ValueError(
                        f"audio mask from {condition.mask_dir!r} has {tuple(mask.shape[1:])} steps, the latents {t}"
                    )
                m = (mask > 0.5).to(x0.device)
            else:  # first_frame / spatial_crop are rejected for audio at config load
                raise TypeError(f"{condition.type!r} does not apply to audio")
            return m

        def reference_tokens(condition: ReferenceCondition) -> tuple[torch.Tensor, torch.Tensor]:
            ref_grid = batch[condition.latents_dir]["latents"].float()
            return self.audio_patchifier.patchify(ref_grid), self._audio_positions(ref_grid)

        inputs = self._modality(
            "audio", cfg, x0, positions, contexts.audio, contexts.mask, draws, token_mask, reference_tokens
        )
        present = batch[cfg.latents_dir].get(HAS_AUDIO)
        if present is None or not inputs.generated:
            return inputs
        # A clip without an audio track trains the video only: its silent placeholder is not a target.
        keep = present.to(device=x0.device, dtype=torch.bool).reshape(b, 1)
        return replace(inputs, loss_mask=inputs.loss_mask & keep)

    # -- shared --------------------------------------------------------------------------------------
    def _modality(
        self,
        name: str,
        cfg: ModalityConfig,
        x0: torch.Tensor,
        positions: torch.Tensor,
        context: torch.Tensor,
        context_mask: torch.Tensor,
        draws: Draws,
        token_mask: Callable[[Any], torch.Tensor],
        reference_tokens: Callable[[ReferenceCondition], tuple[torch.Tensor, torch.Tensor]],
    ) -> ModalityInputs:
        """Noise, conditions and references for one modality's tokens x0 (B, N, C)."""
        b, n, c = x0.shape
        device = x0.device
        f32 = torch.float32
        if not cfg.is_generated:
            modality = Modality(
                latent=x0, timesteps=torch.zeros(b, n, device=device), sigma=torch.zeros(b, device=device),
                positions=positions, context=context, context_mask=context_mask,
            )  # fmt: skip
            return ModalityInputs(modality, None, torch.zeros(b, n, dtype=torch.bool, device=device))

        sigma = self.sampler.sample(b, n, draws, f"{name}.", device)
        eps = draws.randn(f"{name}.noise", (b, n, c), device, f32)
        s = sigma.view(b, 1, 1)
        latent = (1 - s) * x0 + s * eps
        targets = eps - x0
        timesteps = sigma.view(b, 1).expand(b, n).clone()
        loss_mask = torch.ones(b, n, dtype=torch.bool, device=device)

        for i, condition in enumerate(cfg.conditions):
            if isinstance(condition, ReferenceCondition):
                continue
            u = draws.rand(f"{name}.cond{i}_{condition.type}_bernoulli", (b,), device, f32)
            m = token_mask(condition) & (u < condition.probability).view(b, 1)
            mf = m.to(f32)
            latent = mf.unsqueeze(-1) * x0 + (1 - mf.unsqueeze(-1)) * latent
            timesteps = timesteps * (1 - mf)
            loss_mask = loss_mask & ~m

        latent, positions, timesteps, loss_mask = _prepend_references(
            name, cfg.conditions, draws, reference_tokens, latent, positions, timesteps, loss_mask
        )
        modality = Modality(
            latent=latent, timesteps=timesteps, sigma=sigma, positions=positions,
            context=context, context_mask=context_mask,
        )  # fmt: skip
        return ModalityInputs(modality, targets, loss_mask)


def _prepend_references(
    name: str,
    conditions: Sequence[Any],
    draws: Draws,
    reference_tokens: Callable[[ReferenceCondition], tuple[torch.Tensor, torch.Tensor]],
    latent: torch.Tensor,
    positions: torch.Tensor,
    timesteps: torch.Tensor,
    loss_mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each reference condition, drawn with its probability, puts its clean tokens before the target's:
    timestep 0, outside the loss."""
    b, device, f32 = latent.shape[0], latent.device, torch.float32
    for i, condition in enumerate(conditions):
        if not isinstance(condition, ReferenceCondition):
            continue
        u = draws.rand(f"{name}.cond{i}_reference_apply", (), device, f32)
        if not bool(u < condition.probability):
            continue
        ref_tokens, ref_positions = reference_tokens(condition)
        if ref_tokens.shape[0] != b:
            raise ValueError(f"{condition.latents_dir!r} batch {ref_tokens.shape[0]} != target batch {b}")
        k = ref_tokens.shape[1]
        latent = torch.cat([ref_tokens, latent], dim=1)
        positions = torch.cat([ref_positions.to(positions.dtype), positions], dim=2)
        timesteps = torch.cat([torch.zeros(b, k, device=device), timesteps], dim=1)
        loss_mask = torch.cat([torch.zeros(b, k, dtype=torch.bool, device=device), loss_mask], dim=1)
    return latent, positions, timesteps, loss_mask


def _fps(source: Mapping[str, torch.Tensor], default: float = DEFAULT_FPS) -> float:
    """The frame rate of batch item 0 (all items of a batch share a resolution bucket and rate)."""
    value = source.get("fps")
    if value is None:
        return default
    fps = float(value.reshape(-1)[0])
    return fps if fps > 0 else default
