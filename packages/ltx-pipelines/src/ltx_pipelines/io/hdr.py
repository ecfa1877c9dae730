"""HDR signal handling for the HDR IC-LoRA: the LogC3 working space, reflect-padded input frames, and
the BT.2100 HLG encoding of the 10-bit master.

The HDR IC-LoRA works in ARRI LogC3 (EI 800) codes: the VAE sees [0, 1] log codes mapped to [-1, 1],
and its decoded output is turned back into scene-linear Rec.709 light with the inverse curve, so
highlights come out above 1.0. SDR input (Rec.709 display codes) enters the working space unchanged
(clamped to [0, 1]), which is how the LoRA was trained.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# ARRI LogC3 at EI 800 (ALEXA LogC curve, published parameters): log10 segment above `cut`, linear below.
_LOGC3_CUT = 0.010591
_LOGC3_A, _LOGC3_B = 5.555556, 0.052272
_LOGC3_C, _LOGC3_D = 0.247190, 0.385537
_LOGC3_E, _LOGC3_F = 5.367655, 0.092809
_LOGC3_CODE_AT_CUT = _LOGC3_E * _LOGC3_CUT + _LOGC3_F

# BT.2100 HLG OETF constants.
_HLG_A = 0.17883277
_HLG_B = 1.0 - 4.0 * _HLG_A
_HLG_C = 0.5 - _HLG_A * math.log(4.0 * _HLG_A)
HLG_REFERENCE_WHITE_SIGNAL = 0.75
"""BT.2408: diffuse (SDR) white sits at 75 % of the HLG signal; scene-linear 1.0 is mapped there."""

# BT.2087: linear Rec.709 RGB -> linear BT.2020 RGB.
_REC709_TO_BT2020 = torch.tensor(
    [
        [0.627404, 0.329283, 0.043313],
        [0.069097, 0.919540, 0.011362],
        [0.016391, 0.088013, 0.895595],
    ],
    dtype=torch.float64,
)


def logc3_encode(linear: torch.Tensor) -> torch.Tensor:
    """Scene-linear light [0, inf) -> LogC3 codes in [0, 1]."""
    x = linear.clamp(min=0.0)
    log_part = _LOGC3_C * torch.log10(_LOGC3_A * x + _LOGC3_B) + _LOGC3_D
    lin_part = _LOGC3_E * x + _LOGC3_F
    return torch.where(x >= _LOGC3_CUT, log_part, lin_part).clamp(0.0, 1.0)


def logc3_decode(codes: torch.Tensor) -> torch.Tensor:
    """LogC3 codes (clamped to [0, 1]) -> scene-linear light; code 1.0 is about 55x diffuse white."""
    c = codes.clamp(0.0, 1.0)
    from_log = (torch.pow(10.0, (c - _LOGC3_D) / _LOGC3_C) - _LOGC3_B) / _LOGC3_A
    from_lin = (c - _LOGC3_F) / _LOGC3_E
    return torch.where(c >= _LOGC3_CODE_AT_CUT, from_log, from_lin)


def sdr_to_working_space(frames_uint8: torch.Tensor) -> torch.Tensor:
    """(..., 3) uint8 SDR codes -> working-space [0, 1] codes (display-range input is taken as is)."""
    return (frames_uint8.to(torch.float32) / 255.0).clamp(0.0, 1.0)


def aligned_size(height: int, width: int, multiple: int) -> tuple[int, int]:
    """(height, width) rounded up to `multiple` (the size generated before cropping back)."""
    return -(-height // multiple) * multiple, -(-width // multiple) * multiple


def fit_reflect_pad(frames: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(F, H, W, C) float -> (1, C, F, height, width): scaled down to fit (aspect kept; never up), then
    padded on the bottom and right by reflection (by edge replication where reflection cannot reach)."""
    video = frames.permute(0, 3, 1, 2)  # (F, C, H, W)
    src_h, src_w = video.shape[-2:]
    if src_h > height or src_w > width:
        scale = min(height / src_h, width / src_w)
        size = (max(1, round(src_h * scale)), max(1, round(src_w * scale)))
        video = F.interpolate(video, size=size, mode="bilinear", align_corners=False)
    new_h, new_w = video.shape[-2:]
    pad_bottom, pad_right = height - new_h, width - new_w
    if pad_bottom or pad_right:
        mode = "reflect" if pad_bottom < new_h and pad_right < new_w else "replicate"
        video = F.pad(video, (0, pad_right, 0, pad_bottom), mode=mode)
    return video.permute(1, 0, 2, 3).unsqueeze(0)


def hlg_oetf(scene: torch.Tensor) -> torch.Tensor:
    """BT.2100 HLG OETF: normalised scene light E in [0, 1] -> signal E' in [0, 1]."""
    e = scene.clamp(0.0, 1.0)
    low = torch.sqrt(3.0 * e)
    high = _HLG_A * torch.log((12.0 * e - _HLG_B).clamp(min=1e-12)) + _HLG_C
    return torch.where(e <= 1.0 / 12.0, low, high)


def hlg_scene_scale() -> float:
    """The factor taking scene-linear 1.0 (diffuse white) to the normalised scene light that HLG
    encodes at `HLG_REFERENCE_WHITE_SIGNAL`."""
    return (math.exp((HLG_REFERENCE_WHITE_SIGNAL - _HLG_C) / _HLG_A) + _HLG_B) / 12.0


def linear_rec709_to_hlg_bt2020(linear: torch.Tensor) -> torch.Tensor:
    """(..., 3) scene-linear Rec.709 -> (..., 3) HLG signal with BT.2020 primaries, in [0, 1].

    Highlights up to about 3.8x diffuse white are kept; brighter light clips at signal 1.0.
    """
    bt2020 = linear.to(torch.float64) @ _REC709_TO_BT2020.to(linear.device).T
    return hlg_oetf(bt2020.clamp(min=0.0) * hlg_scene_scale()).to(torch.float32)
