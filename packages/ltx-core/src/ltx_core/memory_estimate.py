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
- VAE decode of one tile: about `VAE_LIVE_MAPS` feature maps of the decoder's widest full-resolution
  stage (`vae_channels`, 128 for the released decoder) at the tile's output size.

The transformer is released before the VAE decodes, so the peak is the larger of the two phases.

What grows with the clip's length is held in host RAM whatever the device (`host_output`):
- the decoded frames, float32 RGB (12 bytes a pixel), kept on the host from the decode until the video
  file is written (`Generation` holds them; the encoder then takes them chunk by chunk);
- the decoded waveform and the vocoder's work on it (`AUDIO_VALUES_PER_SAMPLE` float32 values per output
  sample: the vocoder runs over the whole track at once);
- the final latents (kept for the latents file) and the encoder's buffers of one chunk.
On the CPU (and MPS's shared memory) they add to the decode phase; on CUDA they are checked against the
host's RAM on their own.
It is an estimate (allocator fragmentation and kernel workspaces come on top): `check_fits` keeps a
`headroom` fraction of free memory in reserve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from ltx_core.model.transformer import configure_transformer
from ltx_core.quantization import Fp8CastPolicy
from ltx_core.runtime import RuntimeOptions

ACTIVATION_VALUES_PER_TOKEN_WIDTH = 16
VAE_LIVE_MAPS = 6
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
    vae_channels: int = 128
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


def transformer_weight_bytes(
    checkpoint_config: Mapping[str, Any], options: RuntimeOptions, dtype: torch.dtype
) -> tuple[int, int, int]:
    """(non-block bytes, bytes of one block, number of blocks) under `options`' quantization."""
    with torch.device("meta"):
        model = configure_transformer(checkpoint_config)
    narrow: set[str] = set()
    if options.quantization in ("fp8-cast", "fp8-scaled-mm"):
        narrow = {f"{n}.{leaf}" for n in Fp8CastPolicy().module_names(model) for leaf in ("weight", "bias")}
    non_block = block = 0
    for name, tensor in model.state_dict().items():
        size = tensor.numel() * (1 if name in narrow else _bytes(dtype))
        if name.startswith("transformer_blocks.0."):
            block += size
        elif not name.startswith("transformer_blocks."):
            non_block += size
    return non_block, block, model.num_blocks


def estimate_peak_memory(
    checkpoint_config: Mapping[str, Any],
    options: RuntimeOptions,
    workload: WorkloadShape,
    dtype: torch.dtype = torch.bfloat16,
) -> MemoryEstimate:
    non_block, block, num_blocks = transformer_weight_bytes(checkpoint_config, options, dtype)
    blocks_on_device = min(options.device_slots, num_blocks) if options.streams_blocks else num_blocks
    weights = non_block + blocks_on_device * block

    with torch.device("meta"):
        config = configure_transformer(checkpoint_config).config
    size = _bytes(dtype)
    activations = 0
    for stream, tokens in ((config.video, workload.video_tokens), (config.audio, workload.audio_tokens)):
        if stream is None or tokens == 0:
            continue
        per_item = ACTIVATION_VALUES_PER_TOKEN_WIDTH * tokens * stream.dim * size
        per_item += 2 * tokens * stream.dim * 4  # RoPE cos + sin, float32
        per_item += workload.text_tokens * stream.dim * size  # projected text context
        mod_rows = 1 if workload.shared_timesteps else tokens
        per_item += mod_rows * (config.adaln_rows + 4) * stream.dim * size
        activations += workload.batch * per_item
    vae = 0
    if workload.vae_tile_frames:
        pixels = workload.vae_tile_frames * workload.vae_tile_height * workload.vae_tile_width
        vae = VAE_LIVE_MAPS * workload.vae_channels * pixels * size
    return MemoryEstimate(
        weights=weights, activations=activations, vae_decode=vae, host_output=host_output_bytes(workload)
    )


_FALLBACKS = (
    RuntimeOptions(quantization="fp8-cast"),
    RuntimeOptions(offload="cpu"),
    RuntimeOptions(quantization="fp8-cast", offload="cpu"),
    RuntimeOptions(quantization="fp8-cast", offload="disk"),
)


def _flags(options: RuntimeOptions) -> str:
    parts = []
    if options.quantization:
        parts.append(f"--quantization {options.quantization}")
    if options.offload != "none":
        parts.append(f"--offload {options.offload}")
    return " ".join(parts) or "(no flags)"


class InsufficientMemoryError(ValueError):
    pass


def check_fits(
    checkpoint_config: Mapping[str, Any],
    options: RuntimeOptions,
    workload: WorkloadShape,
    free_bytes: int,
    dtype: torch.dtype = torch.bfloat16,
    headroom: float = 0.1,
    *,
    host: bool = False,
    free_host_bytes: int | None = None,
) -> MemoryEstimate:
    """The estimate, or an `InsufficientMemoryError` naming it and the flags that would make the run fit.

    `host=True`: the models run in host RAM (CPU, or MPS's shared memory), where `--offload cpu` keeps every
    block in that same memory: it saves nothing and is not suggested; the decoded output counts in the same
    budget. Otherwise `free_host_bytes` (the host's available RAM) is checked against the decoded output."""

    def estimate_for(candidate: RuntimeOptions) -> MemoryEstimate:
        if host and candidate.offload == "cpu":
            candidate = replace(candidate, offload="none")
        return estimate_peak_memory(checkpoint_config, candidate, workload, dtype)

    def need(e: MemoryEstimate) -> int:
        return e.host_peak if host else e.peak

    estimate = estimate_for(options)
    if not host and free_host_bytes is not None and estimate.host_output > free_host_bytes * (1 - headroom):
        raise InsufficientMemoryError(
            f"the decoded clip needs about {estimate.host_output / _GIB:.1f} GiB of host RAM (float32 frames "
            f"until the video is written, the waveform, the latents), but only {free_host_bytes / _GIB:.1f} GiB "
            f"is available (keeping {headroom:.0%} in reserve); shorten the clip or lower the resolution"
        )
    budget = int(free_bytes * (1 - headroom))
    if need(estimate) <= budget:
        return estimate
    fitting = []
    for fallback in _FALLBACKS:
        if host and fallback.offload == "cpu":
            continue
        candidate = replace(
            options, quantization=fallback.quantization or options.quantization, offload=fallback.offload
        )
        other = estimate_for(candidate)
        if need(other) <= budget:
            fitting.append(f"{_flags(candidate)} ({need(other) / _GIB:.1f} GiB)")
    advice = (
        "these flags would fit: " + "; ".join(dict.fromkeys(fitting))
        if fitting
        else "no quantization/offload setting fits: lower the resolution or frame count, or tile the VAE decode"
    )
    memory = "RAM is available" if host else "device memory is free"
    raise InsufficientMemoryError(
        f"this run needs about {estimate.describe(host=host)} with {_flags(options)}, but only "
        f"{free_bytes / _GIB:.1f} GiB of {memory} (keeping {headroom:.0%} in reserve); {advice}"
    )
