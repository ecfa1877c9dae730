"""Quantized weights for the transformer.

- `fp8-cast` (`Fp8CastPolicy`): block Linears stored as float8_e4m3fn, upcast in the forward pass;
  any device. LoRAs are fused before the downcast.
- `fp8-scaled-mm` (`Fp8ScaledMMPolicy`): float8 checkpoints with `.weight_scale` / `.input_scale`
  through `torch._scaled_mm`; GPUs with native float8 only (`require_scaled_mm`).
- blockwise float8 (`ltx_core.quantization.blockwise`): 128x128 weight blocks and 1x128 activation
  blocks with float32 scales, a Triton GEMM and its pure-PyTorch reference (Python API only).

- GGUF (`ltx_core.quantization.gguf`): weights already quantized in a GGUF file (Q8_0, K-quants, ...),
  kept as the file's blocks and dequantized per call by `GGUFLinear`; chosen by the file, not here.

Choose one through `ltx_core.runtime.RuntimeOptions(quantization=...)`.
"""

from ltx_core.quantization.capability import require_scaled_mm, supports_scaled_mm
from ltx_core.quantization.fp8_cast import FP8_STORAGE_DTYPE, Fp8CastPolicy, UpcastLinear, fuse_into_fp8
from ltx_core.quantization.fp8_scaled_mm import Fp8ScaledMMPolicy, ScaledMMLinear, dequantized_linear

__all__ = [
    "FP8_STORAGE_DTYPE",
    "Fp8CastPolicy",
    "Fp8ScaledMMPolicy",
    "ScaledMMLinear",
    "UpcastLinear",
    "dequantized_linear",
    "fuse_into_fp8",
    "require_scaled_mm",
    "supports_scaled_mm",
]
