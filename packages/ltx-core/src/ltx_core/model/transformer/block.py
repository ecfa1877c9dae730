"""One audio-video transformer block.

Per stream, with ada(x) = rms_norm(x) * (1 + scale) + shift from the block's AdaLN rows:
1. self-attention:        x += attn1(ada(x), own RoPE, self mask) * gate
2. text cross-attention:  x += attn2(rms_norm(x), context)  (with cross-attention AdaLN: query
                          modulated by rows 6-8, context by the prompt table + prompt AdaLN, times gate)
3. audio<->video:         from snapshots of both streams taken before this step,
                          video += a2v(ada_v(video), ada_a(audio)) * gate_v, and symmetrically;
                          the scale/shift come from each stream's own timesteps, the gate from the
                          other stream's sigma
4. feed-forward:          x += ff(ada(x)) * gate
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from ltx_core.guidance.perturbations import BatchedPerturbationConfig, PerturbationType
from ltx_core.model.transformer.adaln import modulation
from ltx_core.model.transformer.attention import Attention
from ltx_core.model.transformer.config import StreamConfig, TransformerConfig
from ltx_core.model.transformer.feed_forward import FeedForward
from ltx_core.model.transformer.rope import RotaryEmbedding
from ltx_core.tune import KernelChoices
from ltx_core.tune.norm import rms_norm

# AV tables: rows (scale, shift) for a2v, (scale, shift) for v2a, then the gate.
_A2V_ROWS, _V2A_ROWS, _AV_GATE_ROW = slice(0, 2), slice(2, 4), 4


@dataclass(frozen=True)
class StreamState:
    """One stream's tokens and everything the blocks condition them on (prepared once per forward)."""

    x: torch.Tensor  # (B, T, D)
    context: torch.Tensor  # (B, S, D) text context at the stream width
    context_bias: torch.Tensor | None  # (B, 1, 1, S) additive
    timestep_mod: torch.Tensor  # (B, T | 1, rows * D) block AdaLN output
    embedded_timestep: torch.Tensor  # (B, T | 1, D) drives the output modulation
    prompt_mod: torch.Tensor | None  # (B, 1, 2 * D) prompt AdaLN output (cross-attention AdaLN)
    pe: RotaryEmbedding
    self_bias: torch.Tensor | None  # (B, 1, T, T) additive
    enabled: bool = True
    cross_pe: RotaryEmbedding | None = None  # time-only RoPE for the audio<->video attention
    cross_mod: torch.Tensor | None = None  # (B, T | 1, 4 * D) AV scale/shift AdaLN output
    cross_gate_mod: torch.Tensor | None = None  # (B, 1, D) AV gate AdaLN output

    def with_x(self, x: torch.Tensor) -> StreamState:
        return replace(self, x=x)


def _apply_keep(keep: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
    return out if keep is None else out * keep


class AVTransformerBlock(nn.Module):
    """The per-stream layers keep the checkpoint's flat names (`attn1`, `audio_attn1`, `audio_to_video_attn`, ...).
    On the CPU its RMS norms take the path the model's kernel choices time fastest (`ltx_core.tune.norm`)."""

    kernel_choices: KernelChoices | None = None

    def use_kernel_choices(self, choices: KernelChoices | None) -> None:
        self.kernel_choices = choices

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        video, audio = config.video, config.audio
        self.norm_eps = config.norm_eps
        self.cross_attention_adaln = config.cross_attention_adaln
        rows = config.adaln_rows
        gated = config.apply_gated_attention
        eps = config.norm_eps

        def self_attention(s: StreamConfig) -> Attention:
            return Attention(s.dim, s.heads, s.head_dim, gated=gated, norm_eps=eps)

        def text_attention(s: StreamConfig) -> Attention:
            return Attention(s.dim, s.heads, s.head_dim, context_dim=s.context_dim, gated=gated, norm_eps=eps)

        if video is not None:
            self.attn1 = self_attention(video)
            self.attn2 = text_attention(video)
            self.ff = FeedForward(video.dim, bias=video.ff_bias)
            self.scale_shift_table = nn.Parameter(torch.zeros(rows, video.dim))
            if config.cross_attention_adaln:
                self.prompt_scale_shift_table = nn.Parameter(torch.zeros(2, video.dim))
        if audio is not None:
            self.audio_attn1 = self_attention(audio)
            self.audio_attn2 = text_attention(audio)
            self.audio_ff = FeedForward(audio.dim, bias=audio.ff_bias)
            self.audio_scale_shift_table = nn.Parameter(torch.zeros(rows, audio.dim))
            if config.cross_attention_adaln:
                self.audio_prompt_scale_shift_table = nn.Parameter(torch.zeros(2, audio.dim))
        if video is not None and audio is not None:
            # Both directions attend through the audio stream's heads.
            self.audio_to_video_attn = Attention(
                video.dim, audio.heads, audio.head_dim, context_dim=audio.dim, gated=gated, norm_eps=eps
            )
            self.video_to_audio_attn = Attention(
                audio.dim, audio.heads, audio.head_dim, context_dim=video.dim, gated=gated, norm_eps=eps
            )
            self.scale_shift_table_a2v_ca_video = nn.Parameter(torch.zeros(5, video.dim))
            self.scale_shift_table_a2v_ca_audio = nn.Parameter(torch.zeros(5, audio.dim))

    # -- pieces -----------------------------------------------------------------------------------
    def _ada(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.norm_eps, choices=self.kernel_choices) * (1 + scale) + shift

    def _self_and_text_attention(
        self,
        s: StreamState,
        attn1: Attention,
        attn2: Attention,
        table: torch.Tensor,
        prompt_table: torch.Tensor | None,
        perturbations: BatchedPerturbationConfig | None,
        skip_type: PerturbationType,
        block_index: int,
    ) -> torch.Tensor:
        x = s.x
        shift, scale, gate = modulation(table, s.timestep_mod, slice(0, 3))
        keep, skip_all = None, False
        if perturbations is not None and perturbations.any_skip(skip_type, block_index):
            skip_all = perturbations.all_skip(skip_type, block_index)
            if not skip_all:
                keep = perturbations.keep_mask(skip_type, block_index, x.device, x.dtype)
        attended = attn1(self._ada(x, scale, shift), pe=s.pe, mask=s.self_bias, keep=keep, skip_all=skip_all)
        x = x + attended * gate
        x_normed = rms_norm(x, self.norm_eps, choices=self.kernel_choices)
        if not self.cross_attention_adaln:
            return x + attn2(x_normed, s.context, mask=s.context_bias)
        shift_q, scale_q, gate_q = modulation(table, s.timestep_mod, slice(6, 9))
        kv = prompt_table.to(x.dtype)[None, None]  # (1, 1, 2, D): rows shift, scale
        if s.prompt_mod is not None:
            kv = kv + s.prompt_mod.reshape(x.shape[0], s.prompt_mod.shape[1], 2, -1)
        shift_kv, scale_kv = kv.unbind(dim=2)
        query = x_normed * (1 + scale_q) + shift_q
        context = s.context * (1 + scale_kv) + shift_kv
        return x + attn2(query, context, mask=s.context_bias) * gate_q

    def _feed_forward(self, s: StreamState, x: torch.Tensor, ff: FeedForward, table: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = modulation(table, s.timestep_mod, slice(3, 6))
        return x + ff(self._ada(x, scale, shift)) * gate

    def _av_modulated(self, s: StreamState, table: torch.Tensor, rows: slice) -> torch.Tensor:
        scale, shift = modulation(table[:4], s.cross_mod, rows)
        return self._ada(s.x, scale, shift)

    @staticmethod
    def _av_gate(s: StreamState, table: torch.Tensor) -> torch.Tensor:
        (gate,) = modulation(table[_AV_GATE_ROW:], s.cross_gate_mod, slice(None))
        return gate

    @staticmethod
    def _cross_keep(
        perturbations: BatchedPerturbationConfig | None, kind: PerturbationType, block_index: int, ref: torch.Tensor
    ) -> tuple[bool, torch.Tensor | None]:
        """(run at all, per-item keep mask or None when every item keeps it)."""
        if perturbations is None or not perturbations.any_skip(kind, block_index):
            return True, None
        if perturbations.all_skip(kind, block_index):
            return False, None
        return True, perturbations.keep_mask(kind, block_index, ref.device, ref.dtype)

    # -- forward ----------------------------------------------------------------------------------
    def forward(
        self,
        video: StreamState | None,
        audio: StreamState | None,
        perturbations: BatchedPerturbationConfig | None = None,
        block_index: int = 0,
    ) -> tuple[StreamState | None, StreamState | None]:
        run_video = video is not None and video.enabled and video.x.numel() > 0
        run_audio = audio is not None and audio.enabled and audio.x.numel() > 0
        vx = video.x if video is not None else None
        ax = audio.x if audio is not None else None

        if run_video:
            vx = self._self_and_text_attention(
                video, self.attn1, self.attn2, self.scale_shift_table,
                getattr(self, "prompt_scale_shift_table", None),
                perturbations, PerturbationType.SKIP_VIDEO_SELF_ATTN, block_index,
            )  # fmt: skip
        if run_audio:
            ax = self._self_and_text_attention(
                audio, self.audio_attn1, self.audio_attn2, self.audio_scale_shift_table,
                getattr(self, "audio_prompt_scale_shift_table", None),
                perturbations, PerturbationType.SKIP_AUDIO_SELF_ATTN, block_index,
            )  # fmt: skip

        both = video is not None and audio is not None and video.x.numel() > 0 and audio.x.numel() > 0
        if both and (run_video or run_audio):
            # Both directions read the streams as they were before either cross-modal update.
            v_pre = video.with_x(vx)
            a_pre = audio.with_x(ax)
            v_table, a_table = self.scale_shift_table_a2v_ca_video, self.scale_shift_table_a2v_ca_audio
            run, keep = self._cross_keep(perturbations, PerturbationType.SKIP_A2V_CROSS_ATTN, block_index, vx)
            if run_video and run:
                out = self.audio_to_video_attn(
                    self._av_modulated(v_pre, v_table, _A2V_ROWS),
                    self._av_modulated(a_pre, a_table, _A2V_ROWS),
                    pe=video.cross_pe,
                    k_pe=audio.cross_pe,
                )
                vx = vx + _apply_keep(keep, out * self._av_gate(v_pre, v_table))
            run, keep = self._cross_keep(perturbations, PerturbationType.SKIP_V2A_CROSS_ATTN, block_index, ax)
            if run_audio and run:
                out = self.video_to_audio_attn(
                    self._av_modulated(a_pre, a_table, _V2A_ROWS),
                    self._av_modulated(v_pre, v_table, _V2A_ROWS),
                    pe=audio.cross_pe,
                    k_pe=video.cross_pe,
                )
                ax = ax + _apply_keep(keep, out * self._av_gate(a_pre, a_table))

        if run_video:
            vx = self._feed_forward(video, vx, self.ff, self.scale_shift_table)
        if run_audio:
            ax = self._feed_forward(audio, ax, self.audio_ff, self.audio_scale_shift_table)
        return (
            video.with_x(vx) if video is not None else None,
            audio.with_x(ax) if audio is not None else None,
        )
