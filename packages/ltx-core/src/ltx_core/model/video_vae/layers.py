"""Small building blocks of the video VAE: convolutions, norms, pixel shuffles, latent statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from ltx_core.model.video_vae.conv_gemm import gemm_applies, gemm_conv3d
from ltx_core.model.video_vae.time_winograd import time_winograd_applies, time_winograd_conv3d
from ltx_core.model.video_vae.winograd import winograd_applies, winograd_conv3d
from ltx_core.tune import KernelChoices, OpKey, size_class

_HALF_DTYPES = (torch.bfloat16, torch.float16)
# Time and space a timing sample of a convolution's input is cropped to: the choice between paths
# depends on the layer's widths and on the frame size up to about this much, and the timing stays
# a fraction of a second per candidate.
_SAMPLE_FRAMES = 4
_SAMPLE_HEIGHT, _SAMPLE_WIDTH = 64, 96
# A convolution's paths are timed on more frames: time Winograd computes output frames in pairs, each
# of its four 2-D convolutions over one frame per pair, and a 4-frame sample (2 pairs) would time it at
# a batch far below a decode's; spatial Winograd transforms its kernels once per call.
_SAMPLE_FRAMES_PER_PATH = 8


def _spatial_winograd(x, weight, bias, stride, padding) -> torch.Tensor:
    return winograd_conv3d(x, weight, bias)  # `winograd_applies` admits stride 1, padding 1 only


def channels_last_applies(conv: nn.Conv3d) -> bool:
    """Whether `_channels_last` computes `conv`: zero spatial padding, no dilation, one group (the
    other settings are not passed to its `F.conv3d`)."""
    return conv.padding_mode == "zeros" and tuple(conv.dilation) == (1, 1, 1) and conv.groups == 1


def _channels_last(x, weight, bias, stride, padding) -> torch.Tensor:
    """oneDNN's convolution on channels-last copies (another kernel family, `brg_conv`, on some CPUs);
    the output back in the usual layout, which the norms and the next layer read."""
    layout = torch.channels_last_3d
    out = F.conv3d(x.contiguous(memory_format=layout), weight.contiguous(memory_format=layout), bias,
                   (1, *stride), (0, *padding))  # fmt: skip
    return out.contiguous()


def _path_function(path: str):
    """A convolution path besides oneDNN's direct one and the merged edge frames, called as (input
    padded in time, weight, bias, spatial stride, spatial padding) in the dtype it computes in."""
    return {
        "winograd": _spatial_winograd,
        "time-winograd": time_winograd_conv3d,
        "gemm": gemm_conv3d,
        "channels-last": _channels_last,
    }[path]


class Conv3d(nn.Conv3d):
    """`nn.Conv3d` that can run half-precision weights through float32 on the CPU.

    A float32 input with half weights (a decoder that keeps its activations in float32, see
    `cpu_compute_dtype`) convolves with a float32 copy of the weights, made once and reused until the
    weights change; its output stays float32. A half input runs in its dtype, unless the owning model
    measured float32 faster (`half_path = "float32"`, see `vae_compute_path`): then the input goes
    up and the output back down. `cpu_half_mode` ("auto", "native", "float32") pins the choice for
    one layer (benchmarks compare both).
    """

    cpu_half_mode: str = "auto"
    half_path: str | None = None  # set by the owning model from its kernel choices

    def runs_native(self, dtype: torch.dtype) -> bool:
        """Whether a CPU convolution of a `dtype` input with `dtype` weights runs in that dtype."""
        if self.cpu_half_mode == "native":
            return True
        if self.cpu_half_mode == "float32":
            return False
        return self.half_path != "float32"

    def _float_weights(self, weight: torch.Tensor, bias: torch.Tensor | None):
        key = (weight.data_ptr(), weight._version, None if bias is None else (bias.data_ptr(), bias._version))
        cached = self.__dict__.get("_float_cache")
        if cached is None or cached[0] != key:
            cached = (key, weight.float(), None if bias is None else bias.float())
            self.__dict__["_float_cache"] = cached
        return cached[1], cached[2]

    def _via_float32(self, input: torch.Tensor, weight: torch.Tensor) -> bool:
        if input.device.type != "cpu" or weight.dtype not in _HALF_DTYPES:
            return False
        return input.dtype == torch.float32 or not self.runs_native(weight.dtype)

    def computes_in_float32_on_cpu(self, input: torch.Tensor) -> bool:
        """Whether a CPU convolution of `input` runs in float32 (float32 weights, or half ones cast up)."""
        if input.device.type != "cpu" or input.dtype not in (torch.float32, *_HALF_DTYPES):
            return False
        return self.weight.dtype == torch.float32 or self._via_float32(input, self.weight)

    def compute_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weight and bias a CPU float32 convolution uses (the cached float32 copy for half weights)."""
        if self.weight.dtype in _HALF_DTYPES:
            return self._float_weights(self.weight, self.bias)
        return self.weight, self.bias

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if self._via_float32(input, weight):
            w, b = self._float_weights(weight, bias)
            return super()._conv_forward(input.float(), w, b).to(input.dtype)
        return super()._conv_forward(input, weight, bias)

    def plain_conv(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """This layer's convolution (stride, spatial padding mode) with other weights, no dtype handling."""
        return nn.Conv3d._conv_forward(self, input, weight, bias)

    def _apply(self, fn, recurse=True):
        self.__dict__.pop("_float_cache", None)  # dtype/device moves invalidate the float32 copy
        return super()._apply(fn, recurse)


def _conv_work(conv: nn.Conv3d, shape: Sequence[int]) -> float:
    """Multiply-adds of `conv` over an input of `shape` (N, C, T, H, W), about."""
    n, c, t, h, w = shape
    return n * c * conv.out_channels // conv.groups * math.prod(conv.kernel_size) * t * h * w / math.prod(conv.stride)


def vae_compute_path(
    choices: KernelChoices | None, conv: CausalConv3d, height: int, width: int, frames: int = _SAMPLE_FRAMES
) -> str:
    """ "native" or "float32": how a VAE with half-precision weights like `conv`'s runs on the CPU.

    Timed on `conv` (the model's widest convolution) over `height` x `width` frames (cropped to the
    timing sample): on a CPU with native bf16 (AVX512-BF16, AMX) its bf16 convolution measured 0.6x
    the float32 one, on an AVX2 CPU PyTorch sends it to slow reference loops (~25x). Without `choices`
    (a model used off the CPU or never tuned) the weights' dtype.
    """
    layer = conv.conv
    dtype = layer.weight.dtype
    if layer.weight.device.type != "cpu" or dtype not in _HALF_DTYPES or choices is None:
        return "native"
    h, w = min(height, _SAMPLE_HEIGHT), min(width, _SAMPLE_WIDTH)
    shape_class = f"{layer.in_channels}x{layer.out_channels}.px{size_class(h * w)}"
    key = OpKey("vae-compute", str(dtype).removeprefix("torch."), shape_class)
    sample_shape = (1, layer.in_channels, frames + conv.time_kernel - 1, h, w)

    def native() -> torch.Tensor:
        return layer.plain_conv(torch.ones(sample_shape, dtype=dtype), layer.weight, layer.bias)

    def float32() -> torch.Tensor:
        weight, bias = layer.compute_weights()
        return layer.plain_conv(torch.ones(sample_shape), weight, bias)

    work = _conv_work(layer, sample_shape) * (height * width) / (h * w)
    path = choices.choose(key, {"native": native, "float32": float32}, default="native", work=work)
    if path == "native":  # the float32 copy its timing made (450 MB for the 22B decoder's widest layer)
        layer.__dict__.pop("_float_cache", None)
    return path


def widest_conv(model: nn.Module) -> CausalConv3d:
    """The `CausalConv3d` of `model` with the most input x output channels (the one timed for the model)."""
    convs = [m for m in model.modules() if isinstance(m, CausalConv3d)]
    return max(convs, key=lambda m: m.conv.in_channels * m.conv.out_channels)


def cpu_compute_dtype(conv: CausalConv3d, choices: KernelChoices | None, height: int, width: int) -> torch.dtype:
    """The dtype a model whose convolutions look like `conv` should keep its activations in.

    Where half-precision convolutions are measured faster through float32 (`vae_compute_path`), every
    layer would convert its input up and its output back down, and every norm, SiLU and add would run
    on emulated bf16: keeping the activations in float32 between the convolutions removes both (the
    profile in `benchmarks/video_vae_profile.py`). Elsewhere the weights' dtype.
    """
    layer = conv.conv
    if layer.cpu_half_mode != "auto":  # pinned (benchmarks)
        native = layer.cpu_half_mode == "native"
    else:
        native = vae_compute_path(choices, conv, height, width) == "native"
    dtype = layer.weight.dtype
    return dtype if native or layer.weight.device.type != "cpu" or dtype not in _HALF_DTYPES else torch.float32


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

    On the CPU the convolutions are ~95% of a decode's time, and which way of computing one is fastest
    depends on the machine and the layer, so each call takes the path its kernel choices timed fastest
    for its shape class (op kind "conv3d-f32" where it computes in float32, "conv3d-half" where it
    computes natively in bf16/fp16), among those that apply:
    "direct", the padded input through the layer's own convolution (oneDNN);
    "merged" (float32 only), the padding not materialised: the frames whose window is all real run as
    one convolution without time padding, and each edge frame as a short convolution whose time taps
    that read the same repeated frame are summed into one (2 / (3 T) fewer multiply-adds for a 3-tap
    kernel over T frames; it loses over small frames);
    "winograd" (float32, plain 3x3x3 layers), Winograd F(4x4, 3x3) in space (`winograd.py`: 1/4 of the
    multiply-adds as GEMMs, which pays on wide layers over large frames);
    "time-winograd", Winograd F(2, 3) along time (`time_winograd.py`: four 2-D convolutions per pair of
    output frames instead of six);
    "gemm", over small frames, the unfolded input windows times the weights as one matrix product
    (`conv_gemm.py`);
    "channels-last", oneDNN on channels-last copies.
    The three Winograd/GEMM paths write into preallocated outputs, so they are offered at inference only.
    Without kernel choices, and off the CPU, the input is replicate-padded for the layer's own convolution.
    """

    kernel_choices: KernelChoices | None = None

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

    def use_kernel_choices(self, choices: KernelChoices | None) -> None:
        self.kernel_choices = choices

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        front, back = (self.time_kernel - 1, 0) if causal else ((self.time_kernel - 1) // 2,) * 2
        if not (front or back):
            return self.conv(x)
        path = self.kernel_path(x, front, back)
        if path == "direct":
            return self.conv(self._padded(x, front, back))
        if path == "merged":
            return self._forward_merged_edges(x, front, back).to(x.dtype)
        conv = self.conv
        in_float32 = conv.computes_in_float32_on_cpu(x)
        weight, bias = conv.compute_weights() if in_float32 else (conv.weight, conv.bias)
        padded = self._padded(x.float() if in_float32 else x, front, back)
        return _path_function(path)(padded, weight, bias, conv.stride[1:], conv.padding[1:]).to(x.dtype)

    def kernel_path(self, x: torch.Tensor, front: int, back: int) -> str:
        """The path of this call by the kernel choices, among those that apply (see the class docstring):
        op kind "conv3d-f32" where the CPU convolution computes in float32, "conv3d-half" where it
        computes in a half dtype; "direct" without choices, off the CPU and for time-strided layers."""
        conv = self.conv
        if self.kernel_choices is None or x.device.type != "cpu" or conv.stride[0] != 1 or conv.dilation[0] != 1:
            return "direct"
        if conv.computes_in_float32_on_cpu(x):
            kind, dtype = "conv3d-f32", torch.float32
            weight, bias = conv.compute_weights()
        elif x.dtype in _HALF_DTYPES and conv.weight.dtype == x.dtype and conv.runs_native(x.dtype):
            kind, dtype = "conv3d-half", x.dtype
            weight, bias = conv.weight, conv.bias
        else:
            return "direct"
        # All but "direct" and "merged" write into preallocated outputs, which autograd cannot follow.
        inference = not _tracks_gradients(x, weight, bias)
        padded_shape = (*x.shape[:2], x.shape[2] + front + back, *x.shape[3:])
        applies = {
            "merged": kind == "conv3d-f32",
            "winograd": kind == "conv3d-f32" and inference and winograd_applies(conv),
            "time-winograd": inference and time_winograd_applies(conv),
            "gemm": inference and gemm_applies(conv, padded_shape, dtype),
            "channels-last": channels_last_applies(conv),
        }
        key = OpKey(kind, str(dtype).removeprefix("torch."), self._shape_class(x, back))
        sample = x[:1, :, :_SAMPLE_FRAMES_PER_PATH, :_SAMPLE_HEIGHT, :_SAMPLE_WIDTH].to(dtype)
        padded = self._padded(sample, front, back)
        stride, padding = conv.stride[1:], conv.padding[1:]
        candidates = {"direct": lambda: conv.plain_conv(padded, weight, bias)}
        if applies.pop("merged"):
            candidates["merged"] = lambda: self._forward_merged_edges(sample, front, back)
        for name in (name for name, taken in applies.items() if taken):
            compute = _path_function(name)
            candidates[name] = lambda compute=compute: compute(padded, weight, bias, stride, padding)
        return self.kernel_choices.choose(key, candidates, default="direct", work=_conv_work(conv, x.shape))

    def _shape_class(self, x: torch.Tensor, back: int) -> str:
        """The timing class of a call: widths, kernel, stride, padding, and frames / pixels by powers of two."""
        conv = self.conv
        c, t, h, w = x.shape[1:]
        return (
            f"{c}x{conv.out_channels}.k{'x'.join(map(str, conv.kernel_size))}.s{'x'.join(map(str, conv.stride))}"
            f".{conv.padding_mode}.{'causal' if back == 0 else 'symmetric'}.t{size_class(t)}"
            f".px{size_class(min(h, _SAMPLE_HEIGHT) * min(w, _SAMPLE_WIDTH))}"
        )

    @staticmethod
    def _padded(x: torch.Tensor, front: int, back: int) -> torch.Tensor:
        return F.pad(x, (0, 0, 0, 0, front, back), mode="replicate")

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
        # The channel sum of squares as a (1 x C) @ (C x positions) product: torch's reduction over a
        # strided channel axis measured 2-6x slower on the CPU (bf16 128 x 17 x 64 x 96: 63 ms against
        # 10 ms). The squares round to x's dtype and the sum accumulates in float32, as the reference's
        # mean(x**2) does.
        n, channels = x.shape[:2]
        squares = (x * x).reshape(n, channels, -1)
        ones = x.new_ones(1, 1, channels).expand(n, 1, channels)
        mean_square = (torch.bmm(ones, squares) / channels).reshape(n, 1, *x.shape[2:])
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
