"""The LTX-2.5 diffusion video VAE decoder: normalized latent -> pixels by a few denoising steps.

    context = Stage4(Stage3(Stage2(Stage1(ConvIn(unnormalize(z))))))      (neighborhood attention +
                                                                         pixel-shuffle upsampling)
    x_1 ~ N(0, I) on the pixel canvas;  for t_i = 1, 1 - 1/n, ..., 1/n:
        v = Stage5(patchify(x_{t_i}), context, t_i);   x_{t_{i+1}} = x_{t_i} - (t_i - t_{i+1}) v
    pixels = x_0

Stage 5 is AdaLN-modulated by the timestep (scaled by `timestep_scale_multiplier`); an `x0`
decoder predicts x_0 instead of v (its velocity is (x_t - x_0) / t).

Small latents are first edge-padded up to the size at which every stage's attention window fits,
and the last latent frame is repeated `ghost_latent_frames` times through stages 1-4 (the reference's
workaround for the shifted windows at the last frame); the padding is cropped off the pixels.

The noise x_1 is drawn once for the whole padded canvas, before any tile is decoded (from a
`torch.Generator`, a named `NoiseSource` as draw `decoder.0`, or given). Tiled decoding (see
`diffusion_tiling`) runs stages 1-3 once and stages 4-5 tile by tile; each tile takes its slice of
the same canvas noise, so tiles and the untiled decode see the same noise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ltx_core.components.noisers import NoiseSource
from ltx_core.devices import available_memory
from ltx_core.model.video_vae.decoder import to_rgb_frames
from ltx_core.model.video_vae.diffusion_blocks import (
    NORM_EPS,
    DiffusionNABlock,
    NABlock,
    PixelShuffleUpsample,
    SharedAdaLN,
    TimestepMLP,
)
from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx_core.model.video_vae.diffusion_tiling import (
    DiffusionTileGeometry,
    stage4_tile_layout,
    tiling_for_memory,
)
from ltx_core.model.video_vae.layers import PerChannelStatistics, patchify, unpatchify
from ltx_core.model.video_vae.neighborhood_attention import NABackend, choose_backend
from ltx_core.model.video_vae.tiling import TilingConfig, VideoTile, blend_in_time_chunks

logger = logging.getLogger(__name__)

DecoderNoise = Sequence[torch.Tensor] | NoiseSource
STAGE5_W_CHUNKS = 4


def fit_axis(x: torch.Tensor, dim: int, size: int, *, symmetric: bool) -> torch.Tensor:
    """Crop or edge-pad axis `dim` to `size`: at the end only, or split evenly (extra at the end)."""
    length = x.shape[dim]
    if length == size:
        return x
    need = abs(size - length)
    before = need // 2 if symmetric else 0
    if length > size:
        return x.narrow(dim, before, size)
    parts = []
    if before:
        parts.append(x.narrow(dim, 0, 1).expand(*x.shape[:dim], before, *x.shape[dim + 1 :]))
    parts.append(x)
    after = need - before
    parts.append(x.narrow(dim, length - 1, 1).expand(*x.shape[:dim], after, *x.shape[dim + 1 :]))
    return torch.cat(parts, dim=dim)


@dataclass(frozen=True)
class DiffusionTilePlan:
    """A diffusion decode prepared up to its tiles: stages 1-3 are done and the canvas noise drawn.
    `decode_tile` gives a tile's pixels on the padded canvas (`tile_pixel_shape`); the blended canvas
    chunks go through `crop` to become the video's chunks."""

    tiles: list[VideoTile]
    decode_tile: Callable[[VideoTile], torch.Tensor]
    batch_channels: tuple[int, int]
    canvas_fhw: tuple[int, int, int]
    dtype: torch.dtype
    device: torch.device
    crop: Callable[[Iterator[torch.Tensor]], Iterator[torch.Tensor]]

    def tile_pixel_shape(self, tile: VideoTile) -> tuple[int, ...]:
        extents = (len(range(*sl.indices(n))) for sl, n in zip(tile.target, self.canvas_fhw))
        return (*self.batch_channels, *extents)


class DiffusionVideoDecoder(nn.Module):
    """Neighborhood-attention upsampling stages 1-4, then a diffusion stage 5 on pixel patches."""

    def __init__(self, config: DiffusionDecoderConfig, attention_backend: str = "auto") -> None:
        super().__init__()
        self.config = config
        self.scale = config.scale
        self.geometry = DiffusionTileGeometry.of(config)
        # "auto" (natten on CUDA when installed, else the blocked eager path), "blocked", "gather", "natten".
        self.attention_backend = attention_backend
        # The reference's default decode mode runs stage-5 attention in 4 width slabs whose edge
        # windows see replicated columns (`width_slabs`); 1 = plain neighborhood attention.
        self.stage5_w_chunks = STAGE5_W_CHUNKS
        ch, hd = config.stage_channels, config.head_dim
        self.per_channel_statistics = PerChannelStatistics(config.in_channels)
        self.conv_in = nn.Linear(config.in_channels, ch[0])
        self.det_stages = nn.ModuleList(
            nn.ModuleList(NABlock(ch[i], config.stage_kernels[i], hd) for _ in range(config.stage_depths[i]))
            for i in range(len(config.upsamples))
        )
        self.upsamples = nn.ModuleList(
            PixelShuffleUpsample(ch[i], stride, reduction) for i, (stride, reduction) in enumerate(config.upsamples)
        )
        self.t_embedder = TimestepMLP(config.t_emb_dim)
        width, pixel_channels = config.stage5_width, config.out_channels * config.patch_size**2
        self.conv_in_x_t = nn.Linear(pixel_channels, width)
        self.shared_adaln = SharedAdaLN(width, config.t_emb_dim)
        self.diff_blocks = nn.ModuleList(
            DiffusionNABlock(width, config.stage5_kernel, ch[-1], hd) for _ in range(config.stage_depths[-1])
        )
        self.norm_out = nn.RMSNorm(width, eps=NORM_EPS)
        self.conv_out = nn.Linear(width, pixel_channels)

    # -- shapes ------------------------------------------------------------------------------------
    def check_latent(self, shape: Sequence[int]) -> None:
        if len(shape) != 5 or min(shape) < 1:
            raise ValueError(f"video decoder input must be a non-empty (B, C, F', H', W') latent, got {tuple(shape)}")
        if shape[1] != self.config.in_channels:
            raise ValueError(f"video decoder input must have {self.config.in_channels} channels, got {shape[1]}")

    def padded_latent_fhw(self, latent_shape: Sequence[int]) -> tuple[int, int, int]:
        """Latent (frames, height, width) after padding up to the attention floor."""
        return tuple(max(n, m) for n, m in zip(latent_shape[2:], self.geometry.min_latent))  # type: ignore[return-value]

    def _pixels_of(self, fhw: Sequence[int]) -> tuple[int, int, int]:
        f, h, w = fhw
        return (1 + (f - 1) * self.scale.time, h * self.scale.height, w * self.scale.width)

    def pixel_shape(self, latent_shape: Sequence[int]) -> tuple[int, int, int, int, int]:
        return (latent_shape[0], self.config.out_channels, *self._pixels_of(latent_shape[2:]))

    def canvas_shape(self, latent_shape: Sequence[int]) -> tuple[int, int, int, int, int]:
        """Shape of the padded pixel canvas the decoder denoises (and of its noise)."""
        return (latent_shape[0], self.config.out_channels, *self._pixels_of(self.padded_latent_fhw(latent_shape)))

    def tile_layout(self, latent_shape: Sequence[int], tiling: TilingConfig | None) -> list[VideoTile]:
        """Tiles in decode order: `source` in stage-4 cells, `target` in pixels of the padded canvas."""
        return stage4_tile_layout(self.padded_latent_fhw(latent_shape), tiling, self.geometry)

    @property
    def _single_step_x0(self) -> bool:
        return self.config.model_output_type == "x0" and self.config.num_inference_steps == 1

    def noise_shapes(self, latent_shape: Sequence[int], tiling: TilingConfig | None = None) -> list[tuple[int, ...]]:
        """The decoder's random draws, in order: the canvas noise, or (a one-step x0 decoder, whose
        prediction ignores x_t's history) one noise per tile of its stage-5 shape, as the reference draws."""
        self.check_latent(latent_shape)
        if not self._single_step_x0:
            return [self.canvas_shape(latent_shape)]
        s4 = self.geometry.stage4_extent(self.padded_latent_fhw(latent_shape))
        return [
            (latent_shape[0], self.config.out_channels, *self._stage5_fhw(tile, s4))
            for tile in self.tile_layout(latent_shape, tiling)
        ]

    def _stage5_fhw(self, tile: VideoTile, s4: Sequence[int]) -> tuple[int, int, int]:
        (t0, t1, _), (h0, h1, _), (w0, w1, _) = (sl.indices(n) for sl, n in zip(tile.source, s4))
        st, sh, sw = self.geometry.upsample_strides[3]
        frames = (t1 - t0) * st - (1 if t0 == 0 and st == 2 else 0)
        if t1 == s4[0]:
            frames = max(frames, self.config.stage5_kernel[0])
        patch = self.config.patch_size
        return (frames, (h1 - h0) * sh * patch, (w1 - w0) * sw * patch)

    def recommended_tiling(
        self, latent_shape: Sequence[int], device: torch.device | None = None, free_bytes: int | None = None
    ) -> TilingConfig | None:
        """Tiles that fit the device's real free memory (CUDA free memory; available RAM on CPU / MPS);
        None when the untiled decode fits. The weights are counted as already resident."""
        device = device or next(self.parameters()).device
        if free_bytes is None:
            free_bytes = available_memory(device)
            if free_bytes is None:
                raise ValueError(f"cannot read the free memory of {device}; pass an explicit tiling (or free_bytes)")
        element = next(self.parameters()).element_size()
        tiling = tiling_for_memory(
            self.config, self._pixels_of(self.padded_latent_fhw(latent_shape)), free_bytes, element_size=max(element, 4)
        )
        logger.info(
            "diffusion VAE decode tiling for %.1f GiB free: %s",
            free_bytes / 2**30,
            "untiled" if tiling is None else tiling.describe(),
        )
        return tiling

    # -- model pieces ----------------------------------------------------------------------------
    def _stages_1_to_3(self, latent: torch.Tensor, na: NABackend) -> torch.Tensor:
        x = self.conv_in(self.per_channel_statistics.un_normalize(latent).permute(0, 2, 3, 4, 1))
        for stage in range(3):
            for block in self.det_stages[stage]:
                x = block(x, na)
            x = self.upsamples[stage](x)
        return x

    def _stage_4(self, x: torch.Tensor, is_origin: bool, trailing: bool, na: NABackend) -> torch.Tensor:
        for block in self.det_stages[3]:
            x = block(x, na)
        x = self.upsamples[3](x, drop_leading_frame=is_origin)
        if trailing and self.config.ghost_latent_frames:
            # Drop the ghost frames again, but keep at least one stage-5 window of frames.
            frames = x.shape[1]
            content = max(frames - self.config.ghost_latent_frames * self.scale.time, 1)
            x = fit_axis(x, 1, min(frames, max(content, self.config.stage5_kernel[0])), symmetric=False)
        return x

    def _predict(self, context: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor, na: NABackend) -> torch.Tensor:
        """Stage 5: the model output (v or x0) for pixels `x_t` (B, C, F, H, W) at time `t` (B,)."""
        h = self.conv_in_x_t(patchify(x_t, self.config.patch_size).permute(0, 2, 3, 4, 1))
        t_emb = self.t_embedder(self.config.timestep_scale_multiplier * t, h.dtype)
        modulation = self.shared_adaln(t_emb)
        for block in self.diff_blocks:
            h = block(h, context, modulation, na, self.stage5_w_chunks)
        h = self.conv_out(self.norm_out(h)).permute(0, 4, 1, 2, 3)
        return unpatchify(h, self.config.patch_size)

    def _euler(self, x_t: torch.Tensor, out: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor) -> torch.Tensor:
        """x_t - (t - t_next) v in float32, back in x_t's dtype."""
        x32, out32 = x_t.float(), out.float()
        velocity = out32 if self.config.model_output_type == "v" else (x32 - out32) / t.float().view(-1, 1, 1, 1, 1)
        return (x32 - (t - t_next).float().view(-1, 1, 1, 1, 1) * velocity).to(x_t.dtype)

    def _denoise(self, context: torch.Tensor, x_t: torch.Tensor, na: NABackend) -> torch.Tensor:
        n = self.config.num_inference_steps
        times = torch.linspace(1.0, 1.0 / n, n, dtype=torch.float32, device=x_t.device)
        times = times[None, :].expand(x_t.shape[0], n)
        for i in range(n - 1):
            x_t = self._euler(x_t, self._predict(context, x_t, times[:, i], na), times[:, i], times[:, i + 1])
        out = self._predict(context, x_t, times[:, -1], na)
        if self.config.model_output_type == "x0":
            return out
        return self._euler(x_t, out, times[:, -1], torch.zeros_like(times[:, -1]))

    # -- decoding ----------------------------------------------------------------------------------
    def _draw(
        self,
        index: int,
        shape: tuple[int, ...],
        like: torch.Tensor,
        generator: torch.Generator | None,
        noise: DecoderNoise | None,
    ) -> torch.Tensor:
        if noise is None:
            where = like.device if generator is None else generator.device
            return torch.randn(shape, generator=generator, dtype=like.dtype, device=where).to(like.device)
        if callable(noise):
            drawn = noise(f"decoder.{index}", shape, device=like.device, dtype=like.dtype)
        else:
            drawn = noise[index]
        if tuple(drawn.shape) != tuple(shape):
            raise ValueError(f"decoder noise {index} must have shape {tuple(shape)}, got {tuple(drawn.shape)}")
        return drawn.to(device=like.device, dtype=like.dtype)

    def decode_tiled(
        self,
        latent: torch.Tensor,
        tiling: TilingConfig | None = None,
        generator: torch.Generator | None = None,
        noise: DecoderNoise | None = None,
    ) -> Iterator[torch.Tensor]:
        """Decode tile by tile, yielding (B, 3, f, H, W) chunks of consecutive frames in [-1, 1] (not clamped).

        Noise: drawn from `generator` (on its device) when `noise` is None; else `noise` is a named
        `NoiseSource` (draws `decoder.<i>`) or the draws themselves, one per `noise_shapes` entry.
        """
        self.check_latent(latent.shape)
        self._check_noise_count(latent.shape, tiling, noise)
        return self._decode(latent, tiling, generator, noise)

    def _check_noise_count(self, shape: Sequence[int], tiling: TilingConfig | None, noise: DecoderNoise | None) -> None:
        shapes = self.noise_shapes(shape, tiling)
        if noise is not None and not callable(noise) and len(noise) != len(shapes):
            raise ValueError(f"the diffusion decoder makes {len(shapes)} noise draw(s), got {len(noise)}")

    def _decode(
        self,
        latent: torch.Tensor,
        tiling: TilingConfig | None,
        generator: torch.Generator | None,
        noise: DecoderNoise | None,
    ) -> Iterator[torch.Tensor]:
        plan = self.plan_tiles(latent, tiling, generator, noise)
        if len(plan.tiles) == 1:
            chunks: Iterator[torch.Tensor] = iter([plan.decode_tile(plan.tiles[0])])
        else:
            chunks = blend_in_time_chunks(
                plan.tiles, plan.decode_tile, plan.batch_channels, plan.canvas_fhw, plan.dtype, plan.device
            )
        yield from plan.crop(chunks)

    def plan_tiles(
        self,
        latent: torch.Tensor,
        tiling: TilingConfig | None,
        generator: torch.Generator | None = None,
        noise: DecoderNoise | None = None,
    ) -> DiffusionTilePlan:
        """Run stages 1-3 over the whole latent and draw the canvas noise; the plan decodes any tile (stages
        4-5) on its own, so tiles may be decoded apart (on other ranks) and blended later."""
        self.check_latent(latent.shape)
        self._check_noise_count(latent.shape, tiling, noise)
        tiles = self.tile_layout(latent.shape, tiling)
        na = choose_backend(latent.device, self.attention_backend)
        dtype = self.conv_in.weight.dtype
        x = latent.to(dtype)
        content = self._pixels_of(x.shape[2:])
        target = self.padded_latent_fhw(x.shape)
        pads = [t - n for t, n in zip(target, x.shape[2:])]
        x = fit_axis(x, 2, target[0], symmetric=False)
        x = fit_axis(fit_axis(x, 3, target[1], symmetric=True), 4, target[2], symmetric=True)
        crop_h, crop_w = pads[1] // 2 * self.scale.height, pads[2] // 2 * self.scale.width
        canvas = self.canvas_shape(latent.shape)
        s4 = self.geometry.stage4_extent(target)
        ghost = fit_axis(x, 2, target[0] + self.config.ghost_latent_frames, symmetric=False)
        features = self._stages_1_to_3(ghost, na)
        canvas_noise = None if self._single_step_x0 else self._draw(0, canvas, x, generator, noise)

        def decode_tile(tile: VideoTile) -> torch.Tensor:
            (t0, t1, _), (h0, h1, _), (w0, w1, _) = (sl.indices(n) for sl, n in zip(tile.source, s4))
            is_origin, trailing = t0 == 0, t1 == s4[0]
            feat = features[:, t0 : features.shape[1] if trailing else t1, h0:h1, w0:w1]
            context = self._stage_4(feat, is_origin, trailing, na)
            f5, h5, w5 = self._stage5_fhw(tile, s4)
            if canvas_noise is None:
                x_t = self._draw(tile.index, (x.shape[0], self.config.out_channels, f5, h5, w5), x, generator, noise)
            else:
                x_t = canvas_noise[(slice(None), slice(None), *tile.target)]
                x_t = fit_axis(x_t, 2, f5, symmetric=False)
                x_t = fit_axis(fit_axis(x_t, 3, h5, symmetric=True), 4, w5, symmetric=True)
            pixels = self._denoise(context, x_t, na)
            pf, ph, pw = (len(range(*sl.indices(n))) for sl, n in zip(tile.target, canvas[2:]))
            pixels = fit_axis(pixels, 2, pf, symmetric=False)
            return fit_axis(fit_axis(pixels, 3, ph, symmetric=True), 4, pw, symmetric=True)

        return DiffusionTilePlan(
            tiles=tiles,
            decode_tile=decode_tile,
            batch_channels=(canvas[0], canvas[1]),
            canvas_fhw=(canvas[2], canvas[3], canvas[4]),
            dtype=dtype,
            device=x.device,
            crop=lambda chunks: _crop_frames(chunks, content, crop_h, crop_w, latent.dtype),
        )

    def forward(
        self,
        latent: torch.Tensor,
        generator: torch.Generator | None = None,
        noise: DecoderNoise | None = None,
    ) -> torch.Tensor:
        """Untiled decode: normalized latent (B, C, F', H', W') -> pixels (B, 3, F, H, W) in [-1, 1] (not clamped)."""
        return torch.cat(list(self.decode_tiled(latent, None, generator, noise)), dim=2)

    def decode_video(
        self,
        latent: torch.Tensor,
        tiling: TilingConfig | None = None,
        generator: torch.Generator | None = None,
        noise: DecoderNoise | None = None,
    ) -> Iterator[torch.Tensor]:
        """`decode_tiled` for one video (batch 1), yielding (f, H, W, 3) frames in [0, 1]."""
        if latent.ndim == 5 and latent.shape[0] != 1:
            raise ValueError(f"decode_video decodes one video at a time (batch 1), got batch {latent.shape[0]}")
        return (to_rgb_frames(chunk) for chunk in self.decode_tiled(latent, tiling, generator, noise))


def _crop_frames(
    chunks: Iterator[torch.Tensor], content: tuple[int, int, int], crop_h: int, crop_w: int, dtype: torch.dtype
) -> Iterator[torch.Tensor]:
    """Cut the padded canvas chunks back to the content: frames past the last, and the spatial pad."""
    frames, height, width = content
    done = 0
    for chunk in chunks:
        keep = min(chunk.shape[2], frames - done)
        if keep > 0:
            yield chunk[:, :, :keep, crop_h : crop_h + height, crop_w : crop_w + width].to(dtype)
        done += chunk.shape[2]
