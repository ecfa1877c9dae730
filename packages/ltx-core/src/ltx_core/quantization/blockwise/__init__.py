"""Blockwise float8: 128x128 weight blocks and 1x128 activation blocks with float32 scales.

`reference` defines the format and the product in plain PyTorch; `triton_gemm` is our Triton GEMM
kernel for it (tested against the reference under TRITON_INTERPRET=1 on the CPU); `linear` holds the
module and the policy applying it to the transformer blocks. Python API only (not on the CLI) until
the kernel has proven itself on GPUs.
"""

from ltx_core.quantization.blockwise.linear import BlockwiseFp8Linear, BlockwiseFp8Policy, triton_available
from ltx_core.quantization.blockwise.reference import (
    BLOCK,
    blockwise_matmul_reference,
    dequantize_activation,
    dequantize_weight,
    quantize_activation_blockwise,
    quantize_weight_blockwise,
)

__all__ = [
    "BLOCK",
    "BlockwiseFp8Linear",
    "BlockwiseFp8Policy",
    "blockwise_matmul_reference",
    "dequantize_activation",
    "dequantize_weight",
    "quantize_activation_blockwise",
    "quantize_weight_blockwise",
    "triton_available",
]
