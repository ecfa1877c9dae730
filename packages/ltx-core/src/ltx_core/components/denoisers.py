"""Denoisers: turn latent states at a noise level into x0 predictions by calling the transformer.

The model is any callable with the `X0Model` signature
    model(video: Modality | None, audio: Modality | None, perturbations: BatchedPerturbationConfig | None)
        -> (video_x0 | None, audio_x0 | None)
and a denoiser is called by the sampling loops as
    denoiser(video_state, audio_state, sigma, step_index) -> (video_x0 | None, audio_x0 | None).

`SimpleDenoiser` makes one conditional call (distilled models). `GuidedDenoiser` stacks the guidance
passes it needs (cond, negative prompt, STG-perturbed, modality-isolated) along the batch, makes one
model call (optionally split into chunks of `max_batch_size`), and combines them per modality with
`MultiModalGuider`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ltx_core.components.guiders import GuiderSchedule, MultiModalGuider, MultiModalGuiderParams, as_schedule
from ltx_core.guidance.perturbations import (
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)
from ltx_core.types import LatentState

X0Callable = Callable[[Any, Any, BatchedPerturbationConfig | None], tuple[torch.Tensor | None, torch.Tensor | None]]
Predictions = tuple[torch.Tensor | None, torch.Tensor | None]


class Denoiser(Protocol):
    def __call__(
        self,
        video: LatentState | None,
        audio: LatentState | None,
        sigma: float | torch.Tensor,
        step_index: int,
    ) -> Predictions: ...


def _default_modality_type() -> Callable[..., Any]:
    # Imported lazily: the transformer package is heavy and sampling code must not need it at import time.
    from ltx_core.model.transformer import Modality

    return Modality


def token_timesteps(denoise_mask: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Per-token noise level (B, T, 1) = denoise_mask * sigma, with sigma (B,) or a scalar."""
    if sigma.dim() == 1:
        sigma = sigma.reshape(-1, *(1,) * (denoise_mask.dim() - 1))
    return denoise_mask * sigma


def modality_from_state(
    state: LatentState,
    context: torch.Tensor,
    sigma: torch.Tensor,
    context_mask: torch.Tensor | None = None,
    enabled: bool = True,
    modality_type: Callable[..., Any] | None = None,
) -> Any:
    """The transformer input for one modality. `sigma` is (B,); a frozen state reports sigma 0."""
    if state.frozen:
        sigma = torch.zeros_like(sigma)
    make = modality_type or _default_modality_type()
    # Only a marked state passes the mask, so modality types without the field keep working.
    extra = {} if state.keyframes_mask is None else {"keyframes_mask": state.keyframes_mask}
    return make(
        latent=state.latent,
        timesteps=token_timesteps(state.denoise_mask, sigma),
        sigma=sigma,
        positions=state.positions,
        context=context,
        context_mask=context_mask,
        attention_mask=state.attention_mask,
        enabled=enabled,
        **extra,
    )


def _sigma_for(state: LatentState, sigma: float | torch.Tensor, copies: int = 1) -> torch.Tensor:
    value = torch.as_tensor(sigma, dtype=torch.float32, device=state.latent.device).reshape(())
    return value.expand(state.batch_size * copies).clone()


class SimpleDenoiser:
    """One conditional model call per step, no guidance (distilled checkpoints)."""

    def __init__(
        self,
        model: X0Callable,
        video_context: torch.Tensor | None,
        audio_context: torch.Tensor | None,
        context_mask: torch.Tensor | None = None,
        modality_type: Callable[..., Any] | None = None,
    ) -> None:
        self.model = model
        self.video_context = video_context
        self.audio_context = audio_context
        self.context_mask = context_mask
        self.modality_type = modality_type

    def __call__(
        self,
        video: LatentState | None,
        audio: LatentState | None,
        sigma: float | torch.Tensor,
        step_index: int,
    ) -> Predictions:
        if video is None and audio is None:
            raise ValueError("denoiser needs at least one of the video and audio states")
        inputs = []
        for name, state, context in (("video", video, self.video_context), ("audio", audio, self.audio_context)):
            if state is None:
                inputs.append(None)
                continue
            if context is None:
                raise ValueError(f"a {name} state was given but no {name} text context")
            inputs.append(
                modality_from_state(
                    state, context, _sigma_for(state, sigma), self.context_mask, True, self.modality_type
                )
            )
        return self.model(inputs[0], inputs[1], None)


@dataclass(frozen=True)
class _Pass:
    name: str
    perturbation: PerturbationConfig
    negative: bool = False


def _repeat_batch(t: torch.Tensor | None, n: int) -> torch.Tensor | None:
    # Tile the whole batch n times: [b0, b1, ..., b0, b1, ...], matching the pass-major context order.
    return None if t is None else t.repeat(n, *([1] * (t.dim() - 1)))


def _tile_state(state: LatentState, n: int) -> LatentState:
    return dataclasses.replace(
        state,
        latent=_repeat_batch(state.latent, n),
        denoise_mask=_repeat_batch(state.denoise_mask, n),
        positions=_repeat_batch(state.positions, n),
        clean_latent=_repeat_batch(state.clean_latent, n),
        attention_mask=_repeat_batch(state.attention_mask, n),
        keyframes_mask=_repeat_batch(state.keyframes_mask, n),
    )


def _split_modality(modality: Any, sizes: list[int]) -> list[Any]:
    """Split a Modality dataclass along the batch: tensors are sliced, other fields copied."""
    if modality is None:
        return [None] * len(sizes)
    parts: list[dict[str, Any]] = [{} for _ in sizes]
    for f in dataclasses.fields(modality):
        value = getattr(modality, f.name)
        chunks = value.split(sizes) if isinstance(value, torch.Tensor) else [value] * len(sizes)
        for part, chunk in zip(parts, chunks):
            part[f.name] = chunk
    return [dataclasses.replace(modality, **part) for part in parts]


def call_in_chunks(
    model: X0Callable,
    video: Any,
    audio: Any,
    perturbations: BatchedPerturbationConfig | None,
    max_batch_size: int | None,
) -> Predictions:
    """Call the model once, or on consecutive batch chunks of at most `max_batch_size` items."""
    batch = (video if video is not None else audio).latent.shape[0]
    if max_batch_size is None or batch <= max_batch_size:
        return model(video, audio, perturbations)
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a positive item count, got {max_batch_size}")
    sizes = [min(max_batch_size, batch - start) for start in range(0, batch, max_batch_size)]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    results = [
        model(v, a, None if perturbations is None else BatchedPerturbationConfig(perturbations.items[s : s + n]))
        for v, a, s, n in zip(_split_modality(video, sizes), _split_modality(audio, sizes), starts, sizes)
    ]
    video_out = [r[0] for r in results if r[0] is not None]
    audio_out = [r[1] for r in results if r[1] is not None]
    return (torch.cat(video_out) if video_out else None, torch.cat(audio_out) if audio_out else None)


def guidance_passes(params: dict[str, MultiModalGuiderParams]) -> list[_Pass]:
    """The passes one step makes for the present modalities' `params` (by name), in stacking order."""
    passes = [_Pass("cond", PerturbationConfig.empty())]
    if any(p.needs_uncond_text for p in params.values()):
        passes.append(_Pass("uncond", PerturbationConfig.empty(), negative=True))
    stg = []
    for name, kind in (
        ("video", PerturbationType.SKIP_VIDEO_SELF_ATTN),
        ("audio", PerturbationType.SKIP_AUDIO_SELF_ATTN),
    ):
        p = params.get(name)
        if p is not None and p.needs_perturbed:
            if not p.stg_blocks:
                raise ValueError(f"{name} stg_scale {p.stg_scale} needs at least one block in stg_blocks")
            stg.append(Perturbation(kind, p.stg_blocks))
    if stg:
        passes.append(_Pass("perturbed", PerturbationConfig(tuple(stg))))
    if len(params) == 2 and any(p.needs_isolated_modality for p in params.values()):
        isolate = (
            Perturbation(PerturbationType.SKIP_A2V_CROSS_ATTN, None),
            Perturbation(PerturbationType.SKIP_V2A_CROSS_ATTN, None),
        )
        passes.append(_Pass("isolated", PerturbationConfig(isolate)))
    return passes


class GuidedDenoiser:
    """Multi-pass guidance in one batched model call.

    Passes, each the whole state batch, stacked in this order and only when some present modality's
    params need them:
        cond       positive context, no perturbation                         (always)
        uncond     negative context                                          (cfg_scale != 1)
        perturbed  positive context, self-attention skipped in stg_blocks    (stg_scale != 0)
        isolated   positive context, a2v and v2a attention skipped in every block
                                                                             (modality_scale != 1, both modalities)
    Each modality's x0 is then `MultiModalGuider(params).calculate(...)`. Params may be a
    `GuiderSchedule` (sigma-dependent). With `skip_step`, steps that are skipped reuse the modality's
    last guided x0 (its stream is passed with enabled=False); when every present modality skips, no
    model call is made. The object keeps those last predictions: use one per sampling run.
    """

    def __init__(
        self,
        model: X0Callable,
        video_context: torch.Tensor | None,
        audio_context: torch.Tensor | None,
        negative_video_context: torch.Tensor | None = None,
        negative_audio_context: torch.Tensor | None = None,
        video_guidance: MultiModalGuiderParams | GuiderSchedule | None = None,
        audio_guidance: MultiModalGuiderParams | GuiderSchedule | None = None,
        context_mask: torch.Tensor | None = None,
        negative_context_mask: torch.Tensor | None = None,
        max_batch_size: int | None = None,
        modality_type: Callable[..., Any] | None = None,
    ) -> None:
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be a positive item count or None, got {max_batch_size}")
        self.model = model
        self.contexts = {"video": video_context, "audio": audio_context}
        self.negative_contexts = {"video": negative_video_context, "audio": negative_audio_context}
        self.schedules = {"video": as_schedule(video_guidance), "audio": as_schedule(audio_guidance)}
        self.context_mask = context_mask
        self.negative_context_mask = negative_context_mask
        self.max_batch_size = max_batch_size
        self.modality_type = modality_type
        self.last: dict[str, torch.Tensor | None] = {"video": None, "audio": None}

    def reset(self) -> None:
        self.last = {"video": None, "audio": None}

    def _passes(self, params: dict[str, MultiModalGuiderParams]) -> list[_Pass]:
        return guidance_passes(params)

    def _context(self, name: str, negative: bool) -> torch.Tensor:
        positive = self.contexts[name]
        if positive is None:
            raise ValueError(f"a {name} state was given but no {name} text context")
        if not negative:
            return positive
        neg = self.negative_contexts[name]
        if neg is None:
            # Only a modality whose params need the negative pass must have a negative context.
            return positive
        return neg

    def _mask(self, negative: bool, like: torch.Tensor) -> torch.Tensor | None:
        masks = (self.context_mask, self.negative_context_mask)
        if all(m is None for m in masks):
            return None
        chosen = masks[1] if negative else masks[0]
        if chosen is None:
            return torch.ones(like.shape[:2], dtype=torch.int64, device=like.device)
        return chosen

    def _model_input(
        self, name: str, state: LatentState, passes: list[_Pass], sigma: float | torch.Tensor, enabled: bool
    ) -> Any:
        """One modality's model input: its state tiled once per pass, each copy with that pass's context."""
        n = len(passes)
        contexts = [self._context(name, p.negative) for p in passes]
        masks = [self._mask(p.negative, c) for p, c in zip(passes, contexts)]
        mask = None if masks[0] is None else torch.cat([m.expand(c.shape[0], -1) for m, c in zip(masks, contexts)])
        return modality_from_state(
            _tile_state(state, n),
            torch.cat(contexts),
            _sigma_for(state, sigma, n),
            mask,
            enabled=enabled,
            modality_type=self.modality_type,
        )

    def _guided(
        self, name: str, out: torch.Tensor | None, passes: list[_Pass], params: MultiModalGuiderParams
    ) -> torch.Tensor:
        """One modality's guided x0 from its stacked per-pass predictions."""
        if out is None:
            raise ValueError(f"the model returned no {name} prediction for a {name} state")
        chunks = dict(zip((p.name for p in passes), out.chunk(len(passes))))
        cond = chunks["cond"]
        return MultiModalGuider(params).calculate(
            cond,
            chunks.get("uncond", 0.0),
            chunks.get("perturbed", 0.0),
            # A lone modality has no cross-modal attention: its isolated prediction is cond itself.
            chunks.get("isolated", cond),
        )

    def _pass_inputs(
        self,
        states: dict[str, LatentState],
        passes: list[_Pass],
        sigma: float | torch.Tensor,
        skipping: dict[str, bool],
    ) -> tuple[dict[str, Any], BatchedPerturbationConfig]:
        """The model inputs of `passes` stacked pass-major along the batch, and their perturbations."""
        inputs: dict[str, Any] = {"video": None, "audio": None}
        for name, state in states.items():
            inputs[name] = self._model_input(name, state, passes, sigma, enabled=not skipping[name])
        batch = next(iter(states.values())).batch_size
        perturbations = BatchedPerturbationConfig(tuple(p.perturbation for p in passes for _ in range(batch)))
        return inputs, perturbations

    def _predict(
        self,
        states: dict[str, LatentState],
        passes: list[_Pass],
        sigma: float | torch.Tensor,
        skipping: dict[str, bool],
    ) -> dict[str, torch.Tensor | None]:
        """Each modality's x0 of every pass, stacked pass-major along the batch (one model call, or chunks).
        Subclasses that spread the passes over devices override this; the guidance combination stays here."""
        inputs, perturbations = self._pass_inputs(states, passes, sigma, skipping)
        video, audio = call_in_chunks(self.model, inputs["video"], inputs["audio"], perturbations, self.max_batch_size)
        return {"video": video, "audio": audio}

    def __call__(
        self,
        video: LatentState | None,
        audio: LatentState | None,
        sigma: float | torch.Tensor,
        step_index: int,
    ) -> Predictions:
        states = {name: s for name, s in (("video", video), ("audio", audio)) if s is not None}
        if not states:
            raise ValueError("denoiser needs at least one of the video and audio states")
        params = {name: self.schedules[name].params_at(sigma) for name in states}
        skipping = {name: params[name].skips_step(step_index) and self.last[name] is not None for name in states}
        if all(skipping.values()):
            return self.last["video"] if video is not None else None, self.last["audio"] if audio is not None else None

        for name, p in params.items():
            if p.needs_uncond_text and self.negative_contexts[name] is None:
                raise ValueError(f"{name} cfg_scale {p.cfg_scale} != 1 needs a negative {name} text context")

        passes = self._passes(params)
        outputs = self._predict(states, passes, sigma, skipping)

        results: dict[str, torch.Tensor | None] = {"video": None, "audio": None}
        for name in states:
            if skipping[name]:  # a skipped step reuses the modality's last guided x0
                results[name] = self.last[name]
                continue
            results[name] = self.last[name] = self._guided(name, outputs[name], passes, params[name])
        return results["video"], results["audio"]
