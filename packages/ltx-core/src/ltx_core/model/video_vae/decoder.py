"""Video VAE decoder: normalized latent (B, 128, F', H', W') -> pixels (B, 3, 1 + 8(F'-1), 32H', 32W')."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from ltx_core.model.video_vae.blocks import DepthToSpaceUpsample, ResBlockStack, ResnetBlock3D
from ltx_core.model.video_vae.config import VAEBlock, VideoVAEConfig
from ltx_core.model.video_vae.layers import (
    CausalConv3d,
    PerChannelStatistics,
    TimestepEmbedder,
    cpu_compute_dtype,
    make_norm,
    unpatchify,
    widest_conv,
)
from ltx_core.model.video_vae.tiling import TilingConfig, VideoTile, blend_in_time_chunks, decode_tile_layout
from ltx_core.tune import KernelChoices, owned_choices
from ltx_core.types import SpatioTemporalScaleFactors

# A timestep-conditioned decoder denoises slightly: it decodes 0.975 * latent + 0.025 * noise at t = 0.05.
DECODE_NOISE_SCALE = 0.025
DEFAULT_DECODE_TIMESTEP = 0.05


def _bottleneck_channels(config: VideoVAEConfig) -> int:
    """Width at the latent end: the base width times every channel divisor met while upsampling."""
    return config.decoder_base_channels * math.prod(b.multiplier for b in config.decoder_blocks if b.multiplier)


def _decoder_block(block: VAEBlock, channels: int, config: VideoVAEConfig) -> tuple[nn.Module, int]:
    """The module for one decoder block and the channel count it outputs."""
    norm, padding = config.norm_layer, config.decoder_padding
    if block.kind == "res_x":
        stack = ResBlockStack(channels, block.num_layers, norm, padding, config.timestep_conditioning)
        return stack, channels
    out = channels // block.multiplier
    if block.kind == "res_x_y":
        return ResnetBlock3D(channels, out, norm, padding), out
    # Only compress_all honours `residual` (as in the reference).
    residual = block.residual and block.kind == "compress_all"
    return DepthToSpaceUpsample(channels, block.stride, block.multiplier, padding, residual), out


def to_rgb_frames(pixels: torch.Tensor) -> torch.Tensor:
    """Decoder output (1, 3, F, H, W) in [-1, 1] -> frames (F, H, W, 3) in [0, 1]."""
    return ((pixels[0] + 1.0) / 2.0).clamp(0.0, 1.0).permute(1, 2, 3, 0)


class VideoDecoder(nn.Module):
    """Un-normalize, causal conv stack with depth-to-space upsampling, PixelNorm + SiLU + conv, unpatchify.

    `config.causal_decoder` selects causal time padding (output frame t never sees later latents)
    or symmetric padding. With `config.timestep_conditioning` the decoder mixes noise into its
    input and modulates every residual stack and the output norm by the decode timestep.

    On the CPU the decoder owns `kernel_choices` (this machine's timed kernel paths, read on the first
    call, see `ltx_core.tune`): half-precision weights run natively or with float32 activations, and
    each float32 convolution takes its fastest path.
    """

    kernel_choices: KernelChoices | None = None

    def use_kernel_choices(self, choices: KernelChoices | None) -> None:
        self.kernel_choices = choices

    def __init__(self, config: VideoVAEConfig) -> None:
        super().__init__()
        self.config = config
        self.scale: SpatioTemporalScaleFactors = config.decoder_scale
        self.causal = config.causal_decoder
        self.timestep_conditioning = config.timestep_conditioning
        self.per_channel_statistics = PerChannelStatistics(config.latent_channels)
        channels = _bottleneck_channels(config)
        self.conv_in = CausalConv3d(config.latent_channels, channels, padding_mode=config.decoder_padding)
        self.up_blocks = nn.ModuleList()
        for block in reversed(config.decoder_blocks):
            module, channels = _decoder_block(block, channels, config)
            self.up_blocks.append(module)
        self.conv_norm_out = make_norm(config.norm_layer, channels)
        if self.timestep_conditioning:
            self.timestep_scale_multiplier = nn.Parameter(torch.tensor(1000.0))
            self.last_time_embedder = TimestepEmbedder(2 * channels)
            self.last_scale_shift_table = nn.Parameter(torch.zeros(2, channels))
        self.conv_out = CausalConv3d(
            channels, config.out_channels * config.patch_size**2, padding_mode=config.decoder_padding
        )

    # -- input checks ------------------------------------------------------------------------------
    def check_latent(self, shape: torch.Size | tuple[int, ...]) -> None:
        if len(shape) != 5 or min(shape) < 1:
            raise ValueError(f"video decoder input must be a non-empty (B, C, F', H', W') latent, got {tuple(shape)}")
        if shape[1] != self.config.latent_channels:
            raise ValueError(f"video decoder input must have {self.config.latent_channels} channels, got {shape[1]}")
        if self.config.decoder_padding == "reflect" and min(shape[3:]) < 2:
            raise ValueError(
                f"this video decoder pads by reflection and needs a latent at least 2 x 2 in space, got {tuple(shape)}"
            )

    def pixel_shape(self, latent_shape: Sequence[int]) -> tuple[int, int, int, int, int]:
        batch, _, frames, height, width = latent_shape
        return (
            batch,
            self.config.out_channels,
            1 + (frames - 1) * self.scale.time,
            height * self.scale.height,
            width * self.scale.width,
        )

    def _timesteps(self, timestep: torch.Tensor | float | None, batch: int, like: torch.Tensor) -> torch.Tensor:
        if timestep is None:
            timestep = DEFAULT_DECODE_TIMESTEP
        if not isinstance(timestep, torch.Tensor):
            return torch.full((batch,), float(timestep), device=like.device, dtype=like.dtype)
        if timestep.ndim == 0:
            timestep = timestep.expand(batch)
        if tuple(timestep.shape) != (batch,):
            raise ValueError(f"decode timestep must be a scalar or have shape ({batch},), got {tuple(timestep.shape)}")
        return timestep.to(like.device)

    # -- decoding --------------------------------------------------------------------------------------
    def forward(
        self,
        latent: torch.Tensor,
        timestep: torch.Tensor | float | None = None,
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Normalized latent -> pixels (not clamped), in the latent's dtype.

        For a timestep-conditioned decoder, `noise` (latent shape) is mixed into the input; it is
        drawn from `generator` when not given, and `timestep` defaults to 0.05. A decoder without
        timestep conditioning takes neither.
        """
        self.check_latent(latent.shape)
        batch = latent.shape[0]
        choices = owned_choices(self, latent.device)
        x = latent.to(cpu_compute_dtype(widest_conv(self), choices, *latent.shape[3:]))
        timesteps = None
        if self.timestep_conditioning:
            if noise is None:
                # Drawn where the generator lives (a CPU generator can feed a GPU decode).
                where = x.device if generator is None else generator.device
                # In the weights' dtype: the same draws whether or not activations run in float32.
                draw_dtype = self.conv_in.conv.weight.dtype
                noise = torch.randn(x.shape, generator=generator, dtype=draw_dtype, device=where)
            elif tuple(noise.shape) != tuple(x.shape):
                raise ValueError(
                    f"decoder noise must have the latent's shape {tuple(x.shape)}, got {tuple(noise.shape)}"
                )
            x = noise.to(x) * DECODE_NOISE_SCALE + (1.0 - DECODE_NOISE_SCALE) * x
            timesteps = self._timesteps(timestep, batch, x)
        elif timestep is not None or noise is not None:
            raise ValueError("this video decoder is not timestep-conditioned: it takes no timestep and no noise")

        x = self.per_channel_statistics.un_normalize(x)
        x = self.conv_in(x, causal=self.causal)
        if timesteps is not None:  # the embedders see t times a learned multiplier (1000 at init)
            timesteps = timesteps * self.timestep_scale_multiplier.to(x)
        for block in self.up_blocks:
            if isinstance(block, ResBlockStack):
                x = block(x, causal=self.causal, timestep=timesteps)
            else:
                x = block(x, causal=self.causal)
        x = self.conv_norm_out(x)
        if timesteps is not None:
            emb = self.last_time_embedder(timesteps.flatten(), dtype=x.dtype)
            ada = self.last_scale_shift_table.to(x)[None, :, :, None, None, None] + emb.reshape(batch, 2, -1, 1, 1, 1)
            shift, scale = ada.unbind(dim=1)
            x = x * (1 + scale) + shift
        x = self.conv_out(F.silu(x, inplace=not torch.is_grad_enabled()), causal=self.causal)
        return unpatchify(x, self.config.patch_size).to(latent.dtype)

    def tile_layout(self, latent_shape: Sequence[int], tiling: TilingConfig | None) -> list[VideoTile]:
        """The tiles `decode_tiled` decodes, in order (one noise each for a timestep-conditioned decoder)."""
        return decode_tile_layout(tuple(latent_shape[2:]), tiling, self.scale)

    def decode_tiled(
        self,
        latent: torch.Tensor,
        tiling: TilingConfig | None = None,
        generator: torch.Generator | None = None,
        noise: Sequence[torch.Tensor] | None = None,
        *,
        timestep: torch.Tensor | float | None = None,
    ) -> Iterator[torch.Tensor]:
        """Decode tile by tile, yielding (B, 3, f, H, W) chunks of consecutive frames (not clamped).

        Only one temporal band of tiles is decoded and held at a time. A timestep-conditioned
        decoder draws one noise per tile, in tile order, from `generator`, unless `noise` gives
        them (one per tile of `tile_layout`, each with its tile's latent shape). `tiling=None`
        decodes the whole latent as one tile.
        """
        self.check_latent(latent.shape)
        tiles = self.tile_layout(latent.shape, tiling)
        if noise is not None:
            if not self.timestep_conditioning:
                raise ValueError("this video decoder is not timestep-conditioned: it takes no noise")
            if len(noise) != len(tiles):
                raise ValueError(f"tiled decoding needs one noise per tile: {len(tiles)} tiles, got {len(noise)}")
            for tile, tile_noise in zip(tiles, noise):
                want = tuple(latent[(slice(None), slice(None), *tile.source)].shape)
                if tuple(tile_noise.shape) != want:
                    raise ValueError(f"noise {tile.index} must have shape {want}, got {tuple(tile_noise.shape)}")
        return self._decode_tiles(latent, tiles, timestep, generator, noise)

    def _decode_tiles(
        self,
        latent: torch.Tensor,
        tiles: list[VideoTile],
        timestep: torch.Tensor | float | None,
        generator: torch.Generator | None,
        noise: Sequence[torch.Tensor] | None,
    ) -> Iterator[torch.Tensor]:
        def decode_tile(tile: VideoTile) -> torch.Tensor:
            part = latent[(slice(None), slice(None), *tile.source)]
            tile_noise = None if noise is None else noise[tile.index]
            return self(part, timestep=timestep, noise=tile_noise, generator=generator)

        if len(tiles) == 1:  # a lone tile has unit weights: skip the blend buffer
            yield decode_tile(tiles[0])
            return
        batch, channels, *pixel_fhw = self.pixel_shape(latent.shape)
        yield from blend_in_time_chunks(
            tiles, decode_tile, (batch, channels), tuple(pixel_fhw), latent.dtype, latent.device
        )

    def decode_video(
        self,
        latent: torch.Tensor,
        tiling: TilingConfig | None = None,
        generator: torch.Generator | None = None,
        noise: Sequence[torch.Tensor] | None = None,
        *,
        timestep: torch.Tensor | float | None = None,
    ) -> Iterator[torch.Tensor]:
        """`decode_tiled` for one video (batch 1), yielding (f, H, W, 3) frames in [0, 1]."""
        if latent.ndim == 5 and latent.shape[0] != 1:
            raise ValueError(f"decode_video decodes one video at a time (batch 1), got batch {latent.shape[0]}")
        chunks = self.decode_tiled(latent, tiling, generator, noise, timestep=timestep)
        return (to_rgb_frames(chunk) for chunk in chunks)
