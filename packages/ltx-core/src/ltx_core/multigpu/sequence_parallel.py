"""Sequence-parallel (Ulysses) execution of the LTX transformer over the ranks of a process group.

Every rank holds the whole model and the whole inputs. The video and audio tokens are padded to a
multiple of the world size and each rank runs the per-token layers (projections, AdaLN, RoPE,
feed-forward, text cross-attention) on its own contiguous shard. Attention over tokens of a
sharded stream (video self-attention, audio self-attention, audio->video and video->audio) swaps
the sharding with an all-to-all: each rank then holds all tokens of H / world heads, attends with
the padding keys masked out, and swaps back. The outputs are gathered so that every rank returns
the same full velocities as a single-process forward.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.model.transformer.attention import Attention
from ltx_core.model.transformer.attention_backends import AttentionFn
from ltx_core.model.transformer.model import LTXModel, Modality
from ltx_core.multigpu.comm import (
    all_gather_along,
    all_to_all_heads_to_tokens,
    all_to_all_tokens_to_heads,
    padded_length,
    world_rank,
)
from ltx_core.multigpu.wrapped_transformer import WrappedTransformer


@dataclass(frozen=True)
class StreamShard:
    """How one stream's T tokens are split: padded to `padded` tokens, `padded / world` per rank."""

    tokens: int
    padded: int
    world: int
    rank: int

    @property
    def local(self) -> int:
        return self.padded // self.world

    @property
    def start(self) -> int:
        return self.rank * self.local

    def key_padding_bias(self, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
        """(1, 1, 1, padded) additive bias hiding the padding keys; None when nothing is padded."""
        if self.padded == self.tokens:
            return None
        bias = torch.zeros(self.padded, dtype=dtype, device=device)
        bias[self.tokens :] = torch.finfo(dtype).min
        return bias.view(1, 1, 1, -1)


def check_heads_divide(model: LTXModel, world: int) -> None:
    """Ulysses splits heads over ranks: every sharded attention's head count must divide by `world`."""
    for name, module in model.named_modules():
        if isinstance(module, Attention) and not _is_text_attention(name) and module.heads % world:
            raise ValueError(
                f"sequence parallel over {world} ranks needs attention heads divisible by {world}; "
                f"{name} has {module.heads} heads (use a world size that divides the video and audio head counts)"
            )


def check_config_heads_divide(transformer_config: dict, world: int) -> None:
    """`check_heads_divide` from a checkpoint's transformer config alone (before any rank loads a weight)."""
    for key in ("num_attention_heads", "audio_num_attention_heads"):
        heads = transformer_config.get(key)
        if isinstance(heads, int) and heads % world:
            raise ValueError(
                f"sequence parallel over {world} ranks needs attention heads divisible by {world}; the checkpoint's "
                f"{key} is {heads} (use a number of ranks that divides it)"
            )


def _is_text_attention(name: str) -> bool:
    return name.endswith("attn2")


def _pad_tokens(x: torch.Tensor, padded: int, dim: int, replicate: bool) -> torch.Tensor:
    """Pad `x` along `dim` to `padded`; with `replicate` the last token is repeated (keeps timesteps uniform)."""
    missing = padded - x.shape[dim]
    if missing == 0:
        return x
    if replicate:
        filler = x.narrow(dim, x.shape[dim] - 1, 1).expand(
            *[missing if d == dim % x.ndim else s for d, s in enumerate(x.shape)]
        )
    else:
        shape = list(x.shape)
        shape[dim] = missing
        filler = x.new_zeros(shape)
    return torch.cat([x, filler], dim=dim)


def _shard_modality(m: Modality, shard: StreamShard) -> Modality:
    """This rank's slice of a stream: latent, timesteps and positions cut to its tokens, the
    self-attention mask widened to the padded keys (padding keys hidden) and cut to its queries rows
    after the all-to-all (i.e. kept whole: the attention runs on all queries of a head chunk)."""
    b, t = m.latent.shape[:2]
    latent = _pad_tokens(m.latent, shard.padded, 1, replicate=False).narrow(1, shard.start, shard.local)
    timesteps = m.timesteps
    if timesteps.numel() == b * t:
        timesteps = _pad_tokens(timesteps.reshape(b, t, 1), shard.padded, 1, replicate=True)
        timesteps = timesteps.narrow(1, shard.start, shard.local)
    positions = _pad_tokens(m.positions, shard.padded, 2, replicate=True).narrow(2, shard.start, shard.local)
    mask = m.attention_mask
    if mask is not None:
        if tuple(mask.shape) != (b, t, t):
            raise ValueError(f"self-attention mask must be (B, T, T) = {(b, t, t)}, got {tuple(mask.shape)}")
        full = mask.new_zeros(b, shard.padded, shard.padded)
        full[:, :t, :t] = mask
        # Padding queries see the real keys (their rows are dropped) so no row is fully hidden.
        full[:, t:, :t] = 1
        mask = full
    keyframes = m.keyframes_mask
    if keyframes is not None:
        # Padding tokens are unmarked; every rank marks its own tokens (LTX-2.5 keyframe embedding).
        keyframes = _pad_tokens(keyframes.reshape(b, t, 1), shard.padded, 1, replicate=False)
        keyframes = keyframes.narrow(1, shard.start, shard.local)
    return replace(
        m, latent=latent, timesteps=timesteps, positions=positions, attention_mask=mask, keyframes_mask=keyframes
    )


def _ulysses_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    heads: int,
    mask: torch.Tensor | None,
    *,
    inner: AttentionFn,
    key_shard: StreamShard,
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    """Attention of this rank's query tokens over the keys of a sharded stream, heads split over ranks."""
    world = key_shard.world
    q_all = all_to_all_heads_to_tokens(q, world, group)
    k_all = all_to_all_heads_to_tokens(k, world, group)
    v_all = all_to_all_heads_to_tokens(v, world, group)
    if mask is None:
        mask = key_shard.key_padding_bias(q.dtype, q.device)
    out = inner(q_all, k_all, v_all, heads // world, mask)
    return all_to_all_tokens_to_heads(out, world, group)


class SequenceParallelTransformer(WrappedTransformer):
    """Runs `model` (an `LTXModel`) sequence-parallel over `group`; the call signature and the
    outputs are those of the model itself, identical on every rank.

    The sharded attention layers get a per-forward attention function wrapping their own kernel,
    so an attention backend chosen on the model keeps serving the per-rank attention.
    """

    def __init__(self, model: LTXModel, group: dist.ProcessGroup | None = None) -> None:
        super().__init__(model, group)
        world, _ = world_rank(group)
        check_heads_divide(model, world)

    def _sharded_layers(self) -> list[tuple[Attention, str]]:
        """(layer, which stream's shard its keys come from) for every attention that needs the all-to-all."""
        layers = []
        for block in self.model.transformer_blocks:
            for name, keys in (
                ("attn1", "video"), ("audio_attn1", "audio"),
                ("audio_to_video_attn", "audio"), ("video_to_audio_attn", "video"),
            ):  # fmt: skip
                layer = getattr(block, name, None)
                if layer is not None:
                    layers.append((layer, keys))
        return layers

    def forward(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        world, rank = world_rank(self.group)
        if world == 1:
            return self.model(video, audio, perturbations)
        shards: dict[str, StreamShard] = {}
        for name, m in (("video", video), ("audio", audio)):
            if m is not None:
                t = m.latent.shape[1]
                shards[name] = StreamShard(tokens=t, padded=padded_length(t, world), world=world, rank=rank)
        local_video = _shard_modality(video, shards["video"]) if video is not None else None
        local_audio = _shard_modality(audio, shards["audio"]) if audio is not None else None

        layers = self._sharded_layers()
        originals = [layer.attention_fn for layer, _ in layers]
        try:
            for (layer, keys), inner in zip(layers, originals, strict=True):
                if keys in shards:
                    layer.attention_fn = functools.partial(
                        _ulysses_attention, inner=inner, key_shard=shards[keys], group=self.group
                    )
            v_out, a_out = self.model(local_video, local_audio, perturbations)
        finally:
            for (layer, _), inner in zip(layers, originals, strict=True):
                layer.attention_fn = inner
        if v_out is not None:
            v_out = all_gather_along(v_out, 1, world, self.group)[:, : shards["video"].tokens]
        if a_out is not None:
            a_out = all_gather_along(a_out, 1, world, self.group)[:, : shards["audio"].tokens]
        return v_out, a_out
