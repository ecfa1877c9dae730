"""Small building blocks of the video VAE: convolutions, norms, pixel shuffles, latent statistics."""

from __future__ import annotations

import functools
import math

import torch
from torch import nn
from torch.nn import functional as F

from ltx_core.model.video_vae.winograd import use_winograd, winograd_conv3d

_HALF_DTYPES = (torch.bfloat16, torch.float16)
# CPU flags under which oneDNN runs bfloat16 convolutions natively (AVX512-BF16, AMX).
_NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def cpu_has_native_bf16_conv() -> bool:
    """Whether this CPU runs bfloat16 convolutions natively (oneDNN with AVX512-BF16 or AMX).

    Without those instructions PyTorch's bf16 Conv3d falls back to slow reference loops, and
    converting to float32 is faster; with them, the bf16 kernel is 2-5x faster than the float32
    convolution (measured on an AVX512-BF16 Xeon: 0.2-0.45 of the time). Read once per process.
    """
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False  # not Linux: no portable flag query; keep the float32 path that is fast everywhere
    return any(flag in flags for flag in _NATIVE_BF16_CPU_FLAGS)


class Conv3d(nn.Conv3d):
    """`nn.Conv3d` that picks, per CPU, how to run half-precision weights.

    On a CPU with native bf16 convolution (see `cpu_has_native_bf16_conv`) bf16 runs as is (float32
    accumulation, one rounding per output). Elsewhere -- and for float16 -- the input is converted to
    float32 and the output rounded back to the input dtype, with the float32 copy of the weights made
    once and reused until the weights change. `cpu_half_mode` ("auto", "native", "float32") pins the
    choice for one layer (benchmarks compare both).
    """

    cpu_half_mode: str = "auto"

    def runs_native(self, dtype: torch.dtype) -> bool:
        """Whether a CPU convolution with `dtype` weights runs in that dtype (else through float32)."""
        if self.cpu_half_mode == "native":
            return True
        if self.cpu_half_mode == "float32":
            return False
        return dtype == torch.bfloat16 and cpu_has_native_bf16_conv()

    def _float_weights(self, weight: torch.Tensor, bias: torch.Tensor | None):
        key = (weight.data_ptr(), weight._version, None if bias is None else (bias.data_ptr(), bias._version))
        cached = self.__dict__.get("_float_cache")
        if cached is None or cached[0] != key:
            cached = (key, weight.float(), None if bias is None else bias.float())
            self.__dict__["_float_cache"] = cached
        return cached[1], cached[2]

    def computes_in_float32_on_cpu(self, input: torch.Tensor) -> bool:
        """Whether a CPU convolution of `input` runs in float32 (float32 weights, or half ones cast up)."""
        if input.device.type != "cpu" or input.dtype not in (torch.float32, *_HALF_DTYPES):
            return False
        dtype = self.weight.dtype
        return dtype == torch.float32 or (dtype in _HALF_DTYPES and not self.runs_native(dtype))

    def compute_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weight and bias a CPU float32 convolution uses (the cached float32 copy for half weights)."""
        if self.weight.dtype in _HALF_DTYPES:
            return self._float_weights(self.weight, self.bias)
        return self.weight, self.bias

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        # A float32 input with half weights comes from a decoder that keeps its activations in float32
        # (see `cpu_compute_dtype`); its output stays float32.
        if input.device.type == "cpu" and weight.dtype in _HALF_DTYPES and not self.runs_native(weight.dtype):
            w, b = self._float_weights(weight, bias)
            return super()._conv_forward(input.float(), w, b).to(input.dtype)
        return super()._conv_forward(input, weight, bias)

    def plain_conv(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """This layer's convolution (stride, spatial padding mode) with other weights, no dtype handling."""
        return nn.Conv3d._conv_forward(self, input, weight, bias)

    def _apply(self, fn, recurse=True):
        self.__dict__.pop("_float_cache", None)  # dtype/device moves invalidate the float32 copy
        return super()._apply(fn, recurse)


def cpu_compute_dtype(conv: Conv3d) -> torch.dtype:
    """The dtype a model whose convolutions look like `conv` should keep its activations in.

    On a CPU where half-precision convolutions go through float32 anyway, every layer would convert
    its input up and its output back down, and every norm, SiLU and add would run on emulated bf16:
    keeping the activations in float32 between the convolutions removes both (the profile in
    `benchmarks/video_vae_profile.py`). Elsewhere the weights' dtype.
    """
    dtype = conv.weight.dtype
    if conv.weight.device.type == "cpu" and dtype in _HALF_DTYPES and not conv.runs_native(dtype):
        return torch.float32
    return dtype


# Edge frames merge their time taps only over frames at least this large: over small frames (the
# 22B decoder's 1024-wide layers at 8 x 12, its 4096-wide upsampling convs at 16 x 24) summing the
# large kernels per call and the extra small convolutions cost more than the saved multiply-adds
# (profiled: those blocks ~2.5x slower).
MIN_MERGED_EDGE_PIXELS = 32 * 48


def _tracks_gradients(*tensors: torch.Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _edge_frame_weights(weight: torch.Tensor, frame: int, frames: int, front: int) -> tuple[int, torch.Tensor]:
    """First input frame and time-merged weight of output `frame` of a conv over replicate-padded time.

    With edge frames repeated, several time taps of an edge output read the same input frame; their
    weights are summed so each input frame is convolved once (`weight` is (out, in, k, kh, kw)).
    """
    k = weight.shape[2]
    sources = [min(max(frame + j - front, 0), frames - 1) for j in range(k)]
    first = sources[0]
    merged = weight.new_zeros((*weight.shape[:2], sources[-1] - first + 1, *weight.shape[3:]))
    for j, source in enumerate(sources):
        merged[:, :, source - first] += weight[:, :, j]
    return first, merged


class CausalConv3d(nn.Module):
    """A 3-D convolution whose time axis is padded by repeating edge frames instead of zeros.

    Causal mode repeats the first frame `k - 1` times in front, so output frame t only sees input
    frames <= t; non-causal mode repeats the first and the last frame `(k - 1) / 2` times each.
    Height and width are padded inside the convolution with `padding_mode`.

    On the CPU in float32 the padding is not materialised: the frames whose window is all real run
    as one convolution without time padding, and each edge frame as a short convolution whose time
    taps that read the same repeated frame are summed into one. Same result to float32 rounding,
    no padded copy of the input, and 2 / (3 T) fewer multiply-adds for a 3-tap kernel over T frames
    (the convolutions are ~95% of a decode's CPU time). Wide 3x3x3 layers there instead take the
    padded input through Winograd F(4x4, 3x3) (`winograd.py`: 1/4 of the multiply-adds, as GEMMs).
    Elsewhere the input is replicate-padded for the layer's own convolution.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int | tuple[int, int, int] = 1,
        padding_mode: str = "zeros",
    ) -> None:
        super().__init__()
        self.time_kernel = kernel_size
        self.conv = Conv3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=(0, kernel_size // 2, kernel_size // 2),
            padding_mode=padding_mode,
        )

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        front, back = (self.time_kernel - 1, 0) if causal else ((self.time_kernel - 1) // 2,) * 2
        if not (front or back):
            return self.conv(x)
        if self.conv.stride[0] == self.conv.dilation[0] == 1 and self.conv.computes_in_float32_on_cpu(x):
            weight, bias = self.conv.compute_weights()
            if use_winograd(self.conv, *x.shape[3:]) and not _tracks_gradients(x, weight, bias):
                # (it writes into preallocated buffers, which autograd cannot follow)
                padded = F.pad(x.float(), (0, 0, 0, 0, front, back), mode="replicate")
                return winograd_conv3d(padded, weight, bias).to(x.dtype)
            if x.shape[3] * x.shape[4] >= MIN_MERGED_EDGE_PIXELS:
                return self._forward_merged_edges(x, front, back).to(x.dtype)
        return self.conv(F.pad(x, (0, 0, 0, 0, front, back), mode="replicate"))

    def _forward_merged_edges(self, x: torch.Tensor, front: int, back: int) -> torch.Tensor:
        weight, bias = self.conv.compute_weights()
        x = x.float()
        frames = x.shape[2]
        inner = range(front, frames - back)  # output frames whose time window holds no repeated frame
        edges = [*range(min(front, frames)), *range(max(frames - back, min(front, frames)), frames)]
        pieces = {frame: self._edge_frame(x, weight, bias, frame, front) for frame in edges}
        if len(inner):
            pieces[inner[0]] = self.conv.plain_conv(x, weight, bias)
        ordered = [pieces[k] for k in sorted(pieces)]
        return ordered[0] if len(ordered) == 1 else torch.cat(ordered, dim=2)

    def _edge_frame(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, frame: int, front: int
    ) -> torch.Tensor:
        """One output frame next to a repeated edge frame, from the input frames its window reads."""
        first, merged = _edge_frame_weights(weight, frame, x.shape[2], front)
        window = x[:, :, first : first + merged.shape[2]]
        conv = self.conv
        if conv.groups != 1:
            return conv.plain_conv(window, merged, bias)
        # One output frame: a 2-D convolution with (channel, frame) pairs as channels. PyTorch sends
        # a 3-D convolution over so few frames to its slow reference loops (`slow_conv3d`), a 2-D one
        # to oneDNN.
        n, c, m, h, w = window.shape
        flat = window.reshape(n, c * m, h, w)
        padding = conv.padding[1:]
        if conv.padding_mode != "zeros":
            flat = F.pad(flat, (padding[1], padding[1], padding[0], padding[0]), mode=conv.padding_mode)
            padding = (0, 0)
        kernel = merged.reshape(merged.shape[0], c * m, *merged.shape[3:])
        return F.conv2d(flat, kernel, bias, conv.stride[1:], padding, conv.dilation[1:]).unsqueeze(2)


class PixelNorm(nn.Module):
    """RMS normalisation over channels at every (frame, row, column); no learned scale."""

    def __init__(self, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One reduction pass (no full-size x**2 temporary) and one multiply: about half the time of
        # x / sqrt(mean(x**2) + eps) on the CPU, same value to float rounding.
        mean_square = torch.linalg.vector_norm(x, dim=1, keepdim=True).square() / x.shape[1]
        return x * torch.rsqrt(mean_square + self.eps)


def make_norm(kind: str, channels: int, groups: int = 32) -> nn.Module:
    if kind == "pixel_norm":
        return PixelNorm()
    if kind == "group_norm":
        return nn.GroupNorm(num_groups=groups, num_channels=channels, eps=1e-6)
    raise ValueError(f"unknown norm layer {kind!r}; accepted: 'pixel_norm', 'group_norm'")


def fold_into_channels(x: torch.Tensor, factors: tuple[int, int, int]) -> torch.Tensor:
    """(B, C, D*a, H*b, W*c) -> (B, C*a*b*c, D, H, W); channel index = ((c*a + i)*b + j)*c + k."""
    a, b, c = factors
    n, ch, d, h, w = x.shape
    x = x.reshape(n, ch, d // a, a, h // b, b, w // c, c)
    x = x.permute(0, 1, 3, 5, 7, 2, 4, 6)
    return x.reshape(n, ch * a * b * c, d // a, h // b, w // c)


def unfold_from_channels(x: torch.Tensor, factors: tuple[int, int, int]) -> torch.Tensor:
    """Inverse of `fold_into_channels`: (B, C*a*b*c, D, H, W) -> (B, C, D*a, H*b, W*c)."""
    a, b, c = factors
    n, ch, d, h, w = x.shape
    x = x.reshape(n, ch // (a * b * c), a, b, c, d, h, w)
    x = x.permute(0, 1, 5, 2, 6, 3, 7, 4)
    return x.reshape(n, ch // (a * b * c), d * a, h * b, w * c)


def patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, F, H*p, W*p) -> (B, C*p*p, F, H, W) with channel index c*p*p + (column offset)*p + (row offset).

    The column offset comes before the row offset: that is the layout the released weights expect.
    """
    if patch == 1:
        return x
    n, ch, f, h, w = x.shape
    x = x.reshape(n, ch, f, h // patch, patch, w // patch, patch)
    x = x.permute(0, 1, 6, 4, 2, 3, 5)
    return x.reshape(n, ch * patch * patch, f, h // patch, w // patch)


def unpatchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """Inverse of `patchify`."""
    if patch == 1:
        return x
    n, ch, f, h, w = x.shape
    x = x.reshape(n, ch // (patch * patch), patch, patch, f, h, w)
    x = x.permute(0, 1, 4, 5, 3, 6, 2)
    return x.reshape(n, ch // (patch * patch), f, h * patch, w * patch)


class PerChannelStatistics(nn.Module):
    """Per-channel mean and spread of the encoder's latent means over the training data.

    `normalize` maps raw latents to the unit-scale latents the transformer works with, and
    `un_normalize` goes back. The buffers keep the checkpoint's hyphenated names.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("std-of-means", torch.ones(channels))
        self.register_buffer("mean-of-means", torch.zeros(channels))

    def _stat(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return self.get_buffer(name).view(1, -1, *([1] * (x.ndim - 2))).to(x)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self._stat("mean-of-means", x)) / self._stat("std-of-means", x)

    def un_normalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self._stat("std-of-means", x) + self._stat("mean-of-means", x)


class _TimestepMLP(nn.Module):
    def __init__(self, in_features: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_features, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class TimestepEmbedder(nn.Module):
    """Timestep -> vector: 256 sinusoidal features (cosines first, max period 10^4), then a SiLU MLP."""

    FREQUENCY_FEATURES = 256

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.timestep_embedder = _TimestepMLP(self.FREQUENCY_FEATURES, dim)

    def forward(self, timestep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        half = self.FREQUENCY_FEATURES // 2
        exponent = -math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=timestep.device) / half
        angles = timestep.float()[:, None] * torch.exp(exponent)[None, :]
        features = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
        weight = self.timestep_embedder.linear_1.weight  # may be bf16 under float32 activations
        return self.timestep_embedder(features.to(weight.dtype)).to(dtype)
