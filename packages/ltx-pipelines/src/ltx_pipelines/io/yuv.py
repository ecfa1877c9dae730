"""RGB -> 8-bit YUV 4:2:0 with BT.709 coefficients in limited ("MPEG", 16-235) range, in torch.

Converting from the decoder's float output directly (on its device) avoids an 8-bit RGB
intermediate and keeps libswscale out of the encode loop; the stream is tagged BT.709 to match.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_KR, _KB = 0.2126, 0.0722  # BT.709 luma weights of red and blue
_KG = 1.0 - _KR - _KB


def rgb_to_yuv420p_bt709(frames: torch.Tensor) -> torch.Tensor:
    """(F, H, W, 3) RGB, uint8 or float in [0, 1] -> (F, H * 3 // 2, W) uint8 planar I420 (Y, then U, then V).

    H and W must be even. Chroma is the 2x2 mean of each block (RGB -> Cb/Cr is linear, so the
    mean can be taken before the conversion).
    """
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected RGB frames shaped (F, H, W, 3); got {tuple(frames.shape)}")
    n, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ValueError(f"yuv420p needs an even frame size; got {w}x{h} (width x height)")
    if frames.dtype == torch.uint8:
        rgb = frames.to(torch.float32) / 255.0
    else:
        rgb = frames.to(torch.float32).clamp(0.0, 1.0)
    rgb = rgb.permute(0, 3, 1, 2)  # (F, 3, H, W)
    r, g, b = rgb.unbind(1)
    luma = _KR * r + _KG * g + _KB * b

    pooled = F.avg_pool2d(rgb, kernel_size=2)
    pr, pg, pb = pooled.unbind(1)
    pooled_luma = _KR * pr + _KG * pg + _KB * pb
    cb = (pb - pooled_luma) / (2.0 * (1.0 - _KB))
    cr = (pr - pooled_luma) / (2.0 * (1.0 - _KR))

    y_codes = (luma * 219.0 + 16.0).round().clamp(0, 255).to(torch.uint8)
    u_codes = (cb * 224.0 + 128.0).round().clamp(0, 255).to(torch.uint8)
    v_codes = (cr * 224.0 + 128.0).round().clamp(0, 255).to(torch.uint8)
    planes = torch.cat([y_codes.reshape(n, -1), u_codes.reshape(n, -1), v_codes.reshape(n, -1)], dim=1)
    return planes.reshape(n, h * 3 // 2, w)
