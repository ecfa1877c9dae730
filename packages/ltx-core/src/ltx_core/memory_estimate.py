"""Predicting the peak device memory of a generation before any weight is loaded.

The estimate has three parts:
- weights: every transformer tensor's bytes after quantization (float8 for the quantized Linears),
  counted on a meta-device build from the checkpoint config; with block streaming, only the
  non-block weights plus `device_slots` blocks;
- transformer activations for the token counts: per stream, the residual stream, the modulated
  input, q/k/v/out projections and the 4x feed-forward hidden layer of one block (about 16 token x
  width values live at once), the RoPE tables (cos and sin, float32) and the AdaLN modulation rows
  (one row per item when timesteps are shared, one per token otherwise). Attention itself is counted
  as memory-efficient (flash / efficient SDPA kernels keep no T x S score matrix);
- VAE decode of one tile: `VAE_LIVE_MAPS` feature maps of the decoder's largest stage. The decoder
  trades channels for resolution (depth to space), so its largest map holds a fixed number of values per
  output pixel (`vae_values_per_pixel`, from the VAE config by `decoder_values_per_pixel`: 8 for the
  released decoder, 128 channels at a quarter of the output's height and width; 3 for the demo's, whose
  output itself is its largest map).

The transformer is released before the VAE decodes, so the peak is the larger of the two phases.

What grows with the clip's length is held in host RAM whatever the device (`host_output`):
- the decoded frames, float32 RGB (12 bytes a pixel), kept on the host from the decode until the video
  file is written (`Generation` holds them; the encoder then takes them chunk by chunk);
- the decoded waveform and the vocoder's work on it (`AUDIO_VALUES_PER_SAMPLE` float32 values per output
  sample: the vocoder runs over the whole track at once);
- the final latents (kept for the latents file) and the encoder's buffers of one chunk.
On the CPU (and MPS's shared memory) they add to the decode phase; on CUDA they are checked against the
host's RAM on their own.
It is an estimate (allocator fragmentation and kernel workspaces come on top). The whole run, phase by
phase (text encoder, stages, decodes), is `ltx_core.generation_memory`; checking it against the free memory
and `--offload auto`'s choice are `ltx_core.offload_auto`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ltx_core.model.transformer import configure_transformer
from ltx_core.quantization import Fp8CastPolicy
from ltx_core.runtime import RuntimeOptions

ACTIVATION_VALUES_PER_TOKEN_WIDTH = 16
VAE_LIVE_MAPS = 4  # the stage input, its normalized copy, the conv output and the residual sum
DECODED_BYTES_PER_PIXEL = 12  # float32 RGB frames on the host until written
ENCODER_BYTES_PER_PIXEL = 18  # one chunk's YUV conversion: float32 planes + the uint8 I420 copy
AUDIO_VALUES_PER_SAMPLE = 16  # float32 values per output sample: the stereo waveform and the vocoder's stages
LATENT_COPIES = 4  # the final latent, its saved copy, the decoder's input and the noise state
_GIB = 2**30


@dataclass(frozen=True)
class WorkloadShape:
    """What one transformer call and one VAE tile process."""

    video_tokens: int
    audio_tokens: int = 0
    text_tokens: int = 1024
    batch: int = 1  # items per transformer call (guidance passes batched together count here)
    shared_timesteps: bool = True
    vae_tile_frames: int = 0  # output pixel frames / height / width of one decoded tile (0: no decode)
    vae_tile_height: int = 0
    vae_tile_width: int = 0
    vae_values_per_pixel: float = 8.0  # the released conv decoder's (see `decoder_values_per_pixel`)
    output_frames: int = 0  # the decoded clip (0: none, e.g. audio-only)
    output_height: int = 0
    output_width: int = 0
    audio_samples: int = 0  # output waveform samples (seconds x the vocoder's output rate)
    latent_values: int = 0  # values of the final video + audio latents


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    activations: int
    vae_decode: int
    host_output: int = 0
    """What the output holds in host RAM whatever the device: decoded frames, waveform, latents, encoder."""

    @property
    def transformer_phase(self) -> int:
        return self.weights + self.activations

    @property
    def peak(self) -> int:
        """The peak on an accelerator (the host's output counted apart)."""
        return max(self.transformer_phase, self.vae_decode)

    @property
    def host_peak(self) -> int:
        """The peak when the models run in host RAM: the decoded output piles up during the decode phase."""
        return max(self.transformer_phase, self.vae_decode + self.host_output)

    def describe(self, *, host: bool = False) -> str:
        peak = self.host_peak if host else self.peak
        output = f"; decoded output on the host {self.host_output / _GIB:.1f} GiB" if self.host_output else ""
        return (
            f"{peak / _GIB:.1f} GiB peak (transformer weights {self.weights / _GIB:.1f} GiB + activations "
            f"{self.activations / _GIB:.1f} GiB; VAE decode {self.vae_decode / _GIB:.1f} GiB{output})"
        )


def host_output_bytes(workload: WorkloadShape) -> int:
    """The host RAM the decoded output takes at its largest (see the module docstring)."""
    pixels = workload.output_frames * workload.output_height * workload.output_width
    chunk = max(workload.vae_tile_frames, 1) * workload.output_height * workload.output_width
    frames = DECODED_BYTES_PER_PIXEL * pixels + ENCODER_BYTES_PER_PIXEL * min(chunk, pixels)
    audio = AUDIO_VALUES_PER_SAMPLE * 4 * workload.audio_samples
    return frames + audio + LATENT_COPIES * 4 * workload.latent_values


def _bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class TransformerSize:
    """What the estimate needs of a transformer, read once from a meta-device build of its config: parameter
    counts outside the blocks and of one block (and how many of each sit in the Linears fp8 narrows), the block
    count and the stream widths its activations grow with."""

    non_block: int
    non_block_narrow: int
    block: int
    block_narrow: int
    num_blocks: int
    video_dim: int
    audio_dim: int  # 0: no audio stream
    adaln_rows: int

    def weight_bytes(self, options: RuntimeOptions, dtype: torch.dtype) -> tuple[int, int]:
        """(non-block bytes, bytes of one block) under `options`' quantization."""
        size = _bytes(dtype)
        if options.quantization in ("fp8-cast", "fp8-scaled-mm"):
            return (
                (self.non_block - self.non_block_narrow) * size + self.non_block_narrow,
                (self.block - self.block_narrow) * size + self.block_narrow,
            )
        return self.non_block * size, self.block * size


def transformer_size(checkpoint_config: Mapping[str, Any]) -> TransformerSize:
    with torch.device("meta"):
        model = configure_transformer(checkpoint_config)
    narrow_modules = set(Fp8CastPolicy().module_names(model))
    counts = {"non_block": 0, "non_block_narrow": 0, "block": 0, "block_narrow": 0}
    for name, tensor in model.state_dict().items():
        if name.startswith("transformer_blocks.0."):
            where = "block"
        elif not name.startswith("transformer_blocks."):
            where = "non_block"
        else:
            continue
        counts[where] += tensor.numel()
        if name.rpartition(".")[0] in narrow_modules:
            counts[f"{where}_narrow"] += tensor.numel()
    config = model.config
    return TransformerSize(
        **counts,
        num_blocks=model.num_blocks,
        video_dim=config.video.dim if config.video is not None else 0,
        audio_dim=config.audio.dim if config.audio is not None else 0,
        adaln_rows=config.adaln_rows,
    )


def transformer_weight_bytes(
    checkpoint_config: Mapping[str, Any], options: RuntimeOptions, dtype: torch.dtype
) -> tuple[int, int, int]:
    """(non-block bytes, bytes of one block, number of blocks) under `options`' quantization."""
    size = transformer_size(checkpoint_config)
    return (*size.weight_bytes(options, dtype), size.num_blocks)


def transformer_activation_bytes(size: TransformerSize, workload: WorkloadShape, dtype: torch.dtype) -> int:
    """One transformer call's live activations (see the module docstring)."""
    value = _bytes(dtype)
    activations = 0
    for dim, tokens in ((size.video_dim, workload.video_tokens), (size.audio_dim, workload.audio_tokens)):
        if dim == 0 or tokens == 0:
            continue
        per_item = ACTIVATION_VALUES_PER_TOKEN_WIDTH * tokens * dim * value
        per_item += 2 * tokens * dim * 4  # RoPE cos + sin, float32
        per_item += workload.text_tokens * dim * value  # projected text context
        mod_rows = 1 if workload.shared_timesteps else tokens
        per_item += mod_rows * (size.adaln_rows + 4) * dim * value
        activations += workload.batch * per_item
    return activations


def vae_decode_bytes(workload: WorkloadShape, dtype: torch.dtype) -> int:
    """One decoded tile's live feature maps: `VAE_LIVE_MAPS` maps of the decoder's largest stage, which holds
    `vae_values_per_pixel` values per output pixel (see `decoder_values_per_pixel`)."""
    pixels = workload.vae_tile_frames * workload.vae_tile_height * workload.vae_tile_width
    return int(VAE_LIVE_MAPS * workload.vae_values_per_pixel * pixels * _bytes(dtype))


def decoder_values_per_pixel(vae_config: Mapping[str, Any]) -> float:
    """The values per output pixel of the convolutional decoder's largest feature map, walking its stages
    from the latent (bottleneck channels at the full compression) to the output: each depth-to-space block
    trades channels for resolution. A diffusion decoder (LTX-2.5) counts its widest stage at a quarter of the
    output's height and width (its patch size)."""
    from ltx_core.model.video_vae.config import VideoVAEConfig
    from ltx_core.model.video_vae.decoder import _bottleneck_channels

    decoder = vae_config.get("decoder")
    if isinstance(decoder, Mapping) and "stage_channels" in decoder:
        patch = int(decoder.get("patch_size", 4))
        return max(max(decoder["stage_channels"]) / patch**2, float(decoder.get("out_channels", 3)))
    config = VideoVAEConfig.from_checkpoint_config(vae_config)
    scale = config.decoder_scale
    channels = _bottleneck_channels(config)
    time, space = scale.time, scale.height
    largest = channels / (time * space * space)
    for block in reversed(config.decoder_blocks):
        if block.kind == "res_x":
            continue
        channels //= block.multiplier or 1
        if block.kind != "res_x_y":
            t, h, _w = block.stride
            time, space = time // t, space // h
        largest = max(largest, channels / (time * space * space))
    return max(largest, float(config.out_channels))


def vocoder_values_per_sample(vocoder_config: Mapping[str, Any]) -> float:
    """Values per output sample of the vocoder's largest map. Each generator (the vocoder, then the bandwidth
    extension) upsamples its input by its `upsample_rates`, halving `upsample_initial_channel` at each stage;
    stage i's map, per sample of that generator's output, is its channels over the upsampling still to come,
    counted per final output sample (the vocoder's output is the extension's input rate)."""
    sections = [vocoder_config.get("vocoder") or vocoder_config, vocoder_config.get("bwe")]
    bwe = vocoder_config.get("bwe") or {}
    final_rate = float(bwe.get("output_sampling_rate", 1))
    largest = 0.0
    for section in sections:
        if not section or "upsample_rates" not in section:
            continue
        rates = [int(r) for r in section["upsample_rates"]]
        channels = float(section.get("upsample_initial_channel", 512))
        own_rate = float(section.get("output_sampling_rate", bwe.get("input_sampling_rate", final_rate)))
        for i in range(len(rates)):
            remaining = 1
            for r in rates[i + 1 :]:
                remaining *= r
            per_sample = channels / 2 ** (i + 1) / remaining * (2 if section.get("stereo") else 1)
            largest = max(largest, per_sample * own_rate / final_rate)
    return largest


def estimate_from_size(
    size: TransformerSize, options: RuntimeOptions, workload: WorkloadShape, dtype: torch.dtype = torch.bfloat16
) -> MemoryEstimate:
    non_block, block = size.weight_bytes(options, dtype)
    blocks_on_device = min(options.device_slots, size.num_blocks) if options.streams_blocks else size.num_blocks
    return MemoryEstimate(
        weights=non_block + blocks_on_device * block,
        activations=transformer_activation_bytes(size, workload, dtype),
        vae_decode=vae_decode_bytes(workload, dtype),
        host_output=host_output_bytes(workload),
    )


def estimate_peak_memory(
    checkpoint_config: Mapping[str, Any],
    options: RuntimeOptions,
    workload: WorkloadShape,
    dtype: torch.dtype = torch.bfloat16,
) -> MemoryEstimate:
    return estimate_from_size(transformer_size(checkpoint_config), options, workload, dtype)


class InsufficientMemoryError(ValueError):
    """A run that does not fit (raised by `ltx_core.offload_auto.check_generation_fits`)."""
