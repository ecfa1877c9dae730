"""What the current device can do natively in float8 (no global state: pure queries)."""

from __future__ import annotations

import torch

# torch._scaled_mm with float8 operands needs Ada (8.9) or newer.
SCALED_MM_MIN_CAPABILITY = (8, 9)


def cuda_capability(device: torch.device) -> tuple[int, int] | None:
    """(major, minor) of a CUDA device, None for any other device or when CUDA is absent."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(device)


def describe_device(device: torch.device) -> str:
    capability = cuda_capability(device)
    if capability is None:
        return f"device {device.type!r}"
    return f"{torch.cuda.get_device_name(device)} (compute capability {capability[0]}.{capability[1]})"


def supports_scaled_mm(device: torch.device) -> bool:
    capability = cuda_capability(device)
    return capability is not None and capability >= SCALED_MM_MIN_CAPABILITY


def require_scaled_mm(device: torch.device, what: str = "fp8-scaled-mm") -> None:
    """Raise a ValueError naming the device's capability and the alternative when fp8 GEMMs cannot run."""
    if not supports_scaled_mm(device):
        need = ".".join(map(str, SCALED_MM_MIN_CAPABILITY))
        raise ValueError(
            f"{what} needs a CUDA GPU with native float8 matmuls (compute capability >= {need}); "
            f"this run uses {describe_device(device)}. Use --quantization fp8-cast instead "
            "(float8 storage, upcast in the forward pass; works on every device)."
        )
