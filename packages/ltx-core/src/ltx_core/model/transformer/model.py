"""The LTX-2 audio-video diffusion transformer (velocity prediction) and its x0 wrapper."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.model.transformer.adaln import AdaLNSingle
from ltx_core.model.transformer.block import AVTransformerBlock, StreamState
from ltx_core.model.transformer.config import StreamConfig, TransformerConfig
from ltx_core.model.transformer.feed_forward import CaptionProjection
from ltx_core.model.transformer.rope import RotaryEmbedding, rotary_embedding
from ltx_core.tune import KernelChoices, owned_choices

_AV_SCALE_SHIFT_ROWS = 4

Velocities = tuple[torch.Tensor | None, torch.Tensor | None]
"""One output per stream (video, audio), None for a stream the call did not have."""


@dataclass(frozen=True)
class Modality:
    """One stream's input to the transformer.

    latent: (B, T, C) tokens. timesteps: (B, T, 1) per-token sigma * denoise mask. sigma: (B,) the
    per-sample noise level (drives the prompt AdaLN and the OTHER stream's cross-modal gate).
    positions: (B, axes, T, 2) float32 [start, end) extents (video: seconds, pixels, pixels; audio:
    seconds). context: (B, S, D) text context. context_mask: (B, S), 1 = visible. attention_mask:
    (B, T, T) in [0, 1] for self-attention. keyframes_mask: (B, T, 1), non-zero on the tokens of
    standalone keyframe latents; they receive the model's learned keyframe embedding (LTX-2.5,
    `use_keyframes_abs_pos_embedding`; ignored by models without one, as the reference does).
    A disabled stream passes through the blocks unchanged but still serves as keys/values of the
    cross-modal attention.
    """

    latent: torch.Tensor
    timesteps: torch.Tensor
    sigma: torch.Tensor
    positions: torch.Tensor
    context: torch.Tensor
    context_mask: torch.Tensor | None = None
    attention_mask: torch.Tensor | None = None
    enabled: bool = True
    keyframes_mask: torch.Tensor | None = None


def context_bias(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, S) keep mask -> (B, 1, 1, S) additive bias (0 visible, -finfo.max hidden)."""
    if mask is None:
        return None
    return ((mask.to(dtype) - 1) * torch.finfo(dtype).max).reshape(mask.shape[0], 1, 1, mask.shape[-1])


def self_attention_bias(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, T, T) weights in [0, 1] -> (B, 1, T, T) additive log bias; 0 becomes finfo.min (fully masked)."""
    if mask is None:
        return None
    if mask.ndim != 3:
        raise ValueError(f"self-attention mask must be (B, T, T) with values in [0, 1], got shape {tuple(mask.shape)}")
    finfo = torch.finfo(dtype)
    logs = torch.log(mask.clamp(min=finfo.tiny)).to(dtype)
    return torch.where(mask > 0, logs, torch.full_like(logs, finfo.min)).unsqueeze(1)


def _check_modality(name: str, m: Modality, stream: StreamConfig, context_width: int) -> None:
    if m.latent.ndim != 3 or m.latent.shape[-1] != stream.in_channels:
        raise ValueError(f"{name} latent must be (B, T, {stream.in_channels}) tokens, got {tuple(m.latent.shape)}")
    b, t = m.latent.shape[:2]
    if m.positions.ndim != 4 or tuple(m.positions.shape) != (m.positions.shape[0], len(stream.max_pos), t, 2):
        raise ValueError(
            f"{name} positions must be (B, {len(stream.max_pos)}, {t}, 2) [start, end) extents, "
            f"got {tuple(m.positions.shape)}"
        )
    if m.timesteps.numel() not in (b, b * t):
        raise ValueError(f"{name} timesteps must hold one value per token (B, T, 1), got {tuple(m.timesteps.shape)}")
    if m.context.ndim != 3 or m.context.shape[0] != b or m.context.shape[-1] != context_width:
        raise ValueError(f"{name} context must be (B={b}, S, {context_width}), got {tuple(m.context.shape)}")
    if m.context_mask is not None and tuple(m.context_mask.shape) != tuple(m.context.shape[:2]):
        raise ValueError(f"{name} context_mask must be {tuple(m.context.shape[:2])}, got {tuple(m.context_mask.shape)}")
    if m.keyframes_mask is not None and m.keyframes_mask.numel() != b * t:
        raise ValueError(f"{name} keyframes_mask must be (B={b}, T={t}, 1), got {tuple(m.keyframes_mask.shape)}")


def _plain_layer_norm(dim: int, eps: float) -> nn.LayerNorm:
    """The output norm: no learned scale or bias (the stream's scale/shift table modulates it instead)."""
    return nn.LayerNorm(dim, eps=eps, elementwise_affine=False)


class LTXModel(nn.Module):
    """The DiT. Build it with `configure_transformer` / the component specs; `config.variant` says
    which streams exist (the absent stream's weights are never created). On the CPU it owns
    `kernel_choices` (this machine's timed kernel paths, read on the first call: `ltx_core.tune`)."""

    kernel_choices: KernelChoices | None = None

    def use_kernel_choices(self, choices: KernelChoices | None) -> None:
        self.kernel_choices = choices

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        video, audio = config.video, config.audio
        rows = config.adaln_rows
        if video is not None:
            self.patchify_proj = nn.Linear(video.in_channels, video.dim)
            if config.keyframes_abs_pos_embedding:
                self.keyframes_abs_pos_embedding = nn.Parameter(torch.zeros(1, video.dim))
            self.adaln_single = AdaLNSingle(video.dim, rows)
            if config.has_prompt_adaln:
                self.prompt_adaln_single = AdaLNSingle(video.dim, 2)
            if config.caption_channels is not None:
                self.caption_projection = CaptionProjection(config.caption_channels, video.dim)
            self.scale_shift_table = nn.Parameter(torch.zeros(2, video.dim))
            self.norm_out = _plain_layer_norm(video.dim, config.norm_eps)
            self.proj_out = nn.Linear(video.dim, video.out_channels)
        if audio is not None:
            self.audio_patchify_proj = nn.Linear(audio.in_channels, audio.dim)
            self.audio_adaln_single = AdaLNSingle(audio.dim, rows)
            if config.has_prompt_adaln:
                self.audio_prompt_adaln_single = AdaLNSingle(audio.dim, 2)
            if config.caption_channels is not None:
                self.audio_caption_projection = CaptionProjection(config.caption_channels, audio.dim)
            self.audio_scale_shift_table = nn.Parameter(torch.zeros(2, audio.dim))
            self.audio_norm_out = _plain_layer_norm(audio.dim, config.norm_eps)
            self.audio_proj_out = nn.Linear(audio.dim, audio.out_channels)
        if video is not None and audio is not None:
            self.av_ca_video_scale_shift_adaln_single = AdaLNSingle(video.dim, _AV_SCALE_SHIFT_ROWS)
            self.av_ca_audio_scale_shift_adaln_single = AdaLNSingle(audio.dim, _AV_SCALE_SHIFT_ROWS)
            self.av_ca_a2v_gate_adaln_single = AdaLNSingle(video.dim, 1)
            self.av_ca_v2a_gate_adaln_single = AdaLNSingle(audio.dim, 1)
        self.transformer_blocks = nn.ModuleList([AVTransformerBlock(config) for _layer in range(config.num_layers)])
        self.gradient_checkpointing = False
        # How a checkpointed block runs: None = torch's non-reentrant checkpoint; the trainer's activation
        # offload sets a wrapper with the same call (block, video state, audio state, perturbations, index).
        self.block_checkpoint = None
        # Compute AdaLN embeddings once per distinct timestep value (see `_adaln`); off = per token.
        self.dedup_timesteps = True

    def set_gradient_checkpointing(self, on: bool) -> None:
        """Recompute each block's activations in the backward pass (training only): less memory, ~25% more time."""
        self.gradient_checkpointing = on

    @property
    def num_blocks(self) -> int:
        """How many transformer blocks run per call (the config's layer count)."""
        return self.config.num_layers

    # -- input preparation ------------------------------------------------------------------------
    def _adaln(self, adaln: AdaLNSingle, values: torch.Tensor, batch: int, dtype: torch.dtype):
        """(B, T | 1, width) AdaLN outputs for per-token (or per-item) timestep values.

        With `dedup_timesteps`, the embedding MLP runs once per distinct value instead of once per
        token (text-to-video has one value per item, image-to-video two), and when every token of
        each item shares one value the result stays (B, 1, width) and broadcasts in the blocks, so
        the (B, T, rows * D) modulation tensor is never materialised.
        """
        flat = values.reshape(batch, -1)
        if not self.dedup_timesteps or flat.shape[1] == 1:
            mod, embedded = adaln(flat.flatten(), dtype)
            return mod.view(batch, -1, mod.shape[-1]), embedded.view(batch, -1, embedded.shape[-1])
        # float32 values: the sinusoid reads them in float32 anyway, and unique supports it on every device.
        distinct, inverse = torch.unique(flat.float(), return_inverse=True)
        mod, embedded = adaln(distinct, dtype)
        if bool((flat == flat[:, :1]).all()):
            inverse = inverse[:, :1]
        return mod[inverse], embedded[inverse]

    def _rope(self, positions: torch.Tensor, dim: int, heads: int, max_pos, dtype: torch.dtype) -> RotaryEmbedding:
        c = self.config
        return rotary_embedding(
            positions, dim=dim, heads=heads, max_pos=max_pos, theta=c.rope_theta,
            rope_type=c.rope_type, float64_grid=c.float64_frequencies, dtype=dtype,
        )  # fmt: skip

    def _prepare(self, m: Modality, stream: StreamConfig, prefix: str) -> StreamState:
        c = self.config
        x = getattr(self, f"{prefix}patchify_proj")(m.latent)
        marker = getattr(self, f"{prefix}keyframes_abs_pos_embedding", None)
        if marker is not None and m.keyframes_mask is not None:
            # x + [mask > 0] * e: marks single-pixel-frame tokens right after the input projection.
            marked = (m.keyframes_mask.reshape(x.shape[0], -1, 1) > 0).to(x.dtype)
            x = x + marked * marker.to(x.dtype)
        batch, dtype = x.shape[0], m.latent.dtype
        timestep_mod, embedded = self._adaln(
            getattr(self, f"{prefix}adaln_single"), m.timesteps * c.timestep_scale_multiplier, batch, dtype
        )
        prompt_mod = None
        if c.has_prompt_adaln:
            sigma = self._per_sample(m.sigma, batch)
            prompt_mod, _ = self._adaln(
                getattr(self, f"{prefix}prompt_adaln_single"), sigma * c.timestep_scale_multiplier, batch, dtype
            )
        context = m.context
        projection = getattr(self, f"{prefix}caption_projection", None)
        if projection is not None:
            context = projection(context)
        return StreamState(
            x=x,
            context=context,
            context_bias=context_bias(m.context_mask, dtype),
            timestep_mod=timestep_mod,
            embedded_timestep=embedded,
            prompt_mod=prompt_mod,
            pe=self._rope(m.positions, stream.dim, stream.heads, stream.max_pos, dtype),
            self_bias=self_attention_bias(m.attention_mask, dtype),
            enabled=m.enabled,
        )

    @staticmethod
    def _per_sample(sigma: torch.Tensor, batch: int) -> torch.Tensor:
        sigma = sigma.reshape(-1)
        if sigma.numel() == 1:
            return sigma.expand(batch)
        if sigma.numel() != batch:
            raise ValueError(f"sigma must hold one value per batch item ({batch}), got shape {tuple(sigma.shape)}")
        return sigma

    def _add_cross_modal(
        self, s: StreamState, m: Modality, stream: StreamConfig, other: Modality, prefix: str, gate_name: str
    ) -> StreamState:
        c = self.config
        audio = c.audio
        batch, dtype = s.x.shape[0], m.latent.dtype
        cross_mod, _ = self._adaln(
            getattr(self, f"av_ca_{prefix}_scale_shift_adaln_single"), m.timesteps * c.timestep_scale_multiplier,
            batch, dtype,
        )  # fmt: skip
        # The gate of the attention this stream receives follows the other stream's noise level.
        other_sigma = self._per_sample(other.sigma, batch)
        gate_scale = c.av_ca_timestep_scale_multiplier / c.timestep_scale_multiplier
        cross_gate_mod, _ = self._adaln(
            getattr(self, gate_name), other_sigma * c.timestep_scale_multiplier * gate_scale, batch, dtype
        )
        # Both cross-modal directions rotate the audio width over the time axis only, split into the heads
        # of the stream the queries (or keys) come from: the video side uses the video head count.
        cross_pe = self._rope(m.positions[:, 0:1], audio.dim, stream.heads, [c.cross_modal_max_pos], dtype)
        return replace(s, cross_pe=cross_pe, cross_mod=cross_mod, cross_gate_mod=cross_gate_mod)

    # -- output -----------------------------------------------------------------------------------
    @staticmethod
    def _output(s: StreamState, table: torch.Tensor, norm: nn.LayerNorm, proj: nn.Linear) -> torch.Tensor:
        shift, scale = (table[None, None].to(s.x.dtype) + s.embedded_timestep[:, :, None]).unbind(dim=2)
        return proj(norm(s.x) * (1 + scale) + shift)

    # -- forward ----------------------------------------------------------------------------------
    def forward(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
    ) -> Velocities:
        """Velocities (same layout as each latent), None for an absent stream."""
        vs, aus = self.prepare_streams(video, audio, perturbations)
        vs, aus = self.run_blocks(vs, aus, perturbations, range(len(self.transformer_blocks)))
        return self.output_streams(vs, aus)

    def prepare_streams(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
    ) -> tuple[StreamState | None, StreamState | None]:
        """Check the inputs and prepare each stream's state for the blocks (`forward`'s first part)."""
        c = self.config
        if video is None and audio is None:
            raise ValueError("the transformer needs at least one of video or audio")
        if video is not None and c.video is None:
            raise ValueError(f"this transformer ({c.variant.value}) has no video stream, but video was given")
        if audio is not None and c.audio is None:
            raise ValueError(f"this transformer ({c.variant.value}) has no audio stream, but audio was given")
        if video is not None:
            _check_modality("video", video, c.video, c.caption_channels or c.video.context_dim)
        if audio is not None:
            _check_modality("audio", audio, c.audio, c.caption_channels or c.audio.context_dim)
        if video is not None and audio is not None and video.latent.shape[0] != audio.latent.shape[0]:
            raise ValueError(f"video batch {video.latent.shape[0]} != audio batch {audio.latent.shape[0]}")
        batch = (video or audio).latent.shape[0]
        if perturbations is not None and perturbations.batch_size != batch:
            raise ValueError(f"perturbations describe {perturbations.batch_size} items, the batch has {batch}")

        owned_choices(self, (video or audio).latent.device)  # this machine's kernel paths, on the first CPU call
        vs = self._prepare(video, c.video, "") if video is not None else None
        aus = self._prepare(audio, c.audio, "audio_") if audio is not None else None
        if vs is not None and aus is not None:
            vs = self._add_cross_modal(vs, video, c.video, audio, "video", "av_ca_a2v_gate_adaln_single")
            aus = self._add_cross_modal(aus, audio, c.audio, video, "audio", "av_ca_v2a_gate_adaln_single")
        return vs, aus

    def run_blocks(
        self,
        vs: StreamState | None,
        aus: StreamState | None,
        perturbations: BatchedPerturbationConfig | None,  # per batch item: which attention paths to skip
        indices: range,
    ) -> tuple[StreamState | None, StreamState | None]:
        """The blocks `indices` (in order) over the prepared states."""
        for index in indices:
            block = self.transformer_blocks[index]
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                if self.block_checkpoint is not None:
                    vs, aus = self.block_checkpoint(block, vs, aus, perturbations, index)
                else:
                    vs, aus = checkpoint(block, vs, aus, perturbations, index, use_reentrant=False)  # torch's own
            else:
                vs, aus = block(vs, aus, perturbations, index)
        return vs, aus

    def output_streams(self, vs: StreamState | None, aus: StreamState | None) -> Velocities:
        """The final norm, modulation and projection of each stream (`forward`'s last part)."""
        v_out = self._output(vs, self.scale_shift_table, self.norm_out, self.proj_out) if vs is not None else None
        a_out = (
            self._output(aus, self.audio_scale_shift_table, self.audio_norm_out, self.audio_proj_out)
            if aus is not None
            else None
        )
        return v_out, a_out


def to_denoised(latent: torch.Tensor, velocity: torch.Tensor, timesteps: torch.Tensor) -> torch.Tensor:
    """x0 = latent - velocity * timesteps (per token), computed in float32."""
    if timesteps.ndim == latent.ndim - 1:
        timesteps = timesteps.unsqueeze(-1)
    result = latent.float() - velocity.float() * timesteps.float()
    return result.to(latent.dtype)


class X0Model(nn.Module):
    """Wraps a velocity model to predict denoised latents: x0 = latent - velocity * timesteps."""

    def __init__(self, model: LTXModel) -> None:
        super().__init__()
        self.velocity = model  # predicts velocities; this wrapper turns them into x0

    @property
    def num_blocks(self) -> int:
        """The wrapped model's block count."""
        return self.velocity.num_blocks

    def forward(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
    ) -> Velocities:
        v_vel, a_vel = self.velocity(video, audio, perturbations)
        v_x0 = to_denoised(video.latent, v_vel, video.timesteps) if v_vel is not None else None
        a_x0 = to_denoised(audio.latent, a_vel, audio.timesteps) if a_vel is not None else None
        return v_x0, a_x0
