"""RMS normalisation on the CPU by the faster of two kernels, measured (op kind "rms-norm").

torch has no fused CPU kernel for `rms_norm`: it runs it as separate float32 passes (upcast, square,
mean, rsqrt, multiply, downcast), ~16% of a bf16 transformer forward on a CPU with native bf16. Its
layer norm is one fused pass. The layer norm of [x, -x] has mean 0 and variance mean(x^2), so it is
x * rsqrt(mean(x^2) + eps), the RMS norm, computed by that fused kernel in float32 and rounded once,
as `rms_norm` rounds it; the two differ only where float32 sums in another order round a bf16 result
the other way (about one value in a million). Which is faster depends on the machine and the width
(the mirrored copy doubles the data the kernel reads): each run's machine times both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ltx_core.tune.choices import KernelChoices, OpKey, size_class

# Below this many elements an RMS norm takes its default path untimed: microseconds either way.
MIN_TUNED_ELEMENTS = 1 << 20


def mirrored_rms_norm(x: torch.Tensor, eps: float, weight: torch.Tensor | None = None) -> torch.Tensor:
    """`x * rsqrt(mean(x^2, -1) + eps) * weight` through torch's fused layer norm over `[x, -x]` (the weight
    applied in float32 before the one rounding, as torch's `rms_norm` applies it)."""
    width = x.shape[-1]
    doubled = None if weight is None else torch.cat([weight, weight])
    return F.layer_norm(torch.cat([x, -x], dim=-1), (2 * width,), doubled, eps=eps)[..., :width]


def rms_norm(
    x: torch.Tensor, eps: float, weight: torch.Tensor | None = None, choices: KernelChoices | None = None
) -> torch.Tensor:
    """`F.rms_norm` over the last dim (times `weight`), on the CPU by the path
    `choices` picks for this width, size class and dtype ("composite": torch's own, the default)."""
    width = x.shape[-1]

    def composite() -> torch.Tensor:
        return F.rms_norm(x, (width,), weight, eps)

    if choices is None or x.device.type != "cpu":
        return composite()

    def mirrored() -> torch.Tensor:
        return mirrored_rms_norm(x, eps, weight)

    rows = x.numel() // max(width, 1)
    key = OpKey("rms-norm", str(x.dtype).removeprefix("torch."), f"d{width}.t{size_class(rows)}")
    # A call inside autograd's graph is not timed (the candidates' work would join the step's graph, as for
    # SDPA), nor a small one: they take a decision made earlier, else the default.
    training = torch.is_grad_enabled() and x.requires_grad
    timeable = not training and x.numel() >= MIN_TUNED_ELEMENTS
    candidates = {"composite": composite, "mirrored": mirrored}
    path = choices.choose(key, candidates, default="composite", timeable=timeable)
    return candidates[path]()
