"""Sampling components: patchifiers, schedules, noiser, guiders, diffusion steps, denoisers, loops."""

from ltx_core.components.denoisers import GuidedDenoiser, SimpleDenoiser
from ltx_core.components.diffusion_steps import (
    EulerAncestralStep,
    EulerStep,
    GradientEstimationEulerStep,
    Res2sStep,
    res2s_coefficients,
)
from ltx_core.components.guiders import (
    APGGuider,
    CFGGuider,
    CFGStarGuider,
    GuiderSchedule,
    MultiModalGuider,
    MultiModalGuiderParams,
    STGGuider,
    projection_coef,
)
from ltx_core.components.noisers import GaussianNoiser, add_noise
from ltx_core.components.patchifiers import AudioPatchifier, VideoPatchifier
from ltx_core.components.sampling import (
    euler_ancestral_denoising_loop,
    euler_denoising_loop,
    gradient_estimation_denoising_loop,
    res2s_denoising_loop,
)
from ltx_core.components.schedulers import (
    DISTILLED_SIGMA_VALUES,
    STAGE_2_DISTILLED_SIGMA_VALUES,
    LTX2Scheduler,
    distilled_sigmas,
    stage_2_distilled_sigmas,
)

__all__ = [
    "DISTILLED_SIGMA_VALUES",
    "STAGE_2_DISTILLED_SIGMA_VALUES",
    "APGGuider",
    "AudioPatchifier",
    "CFGGuider",
    "CFGStarGuider",
    "EulerAncestralStep",
    "EulerStep",
    "GaussianNoiser",
    "GradientEstimationEulerStep",
    "GuidedDenoiser",
    "GuiderSchedule",
    "LTX2Scheduler",
    "MultiModalGuider",
    "MultiModalGuiderParams",
    "Res2sStep",
    "STGGuider",
    "SimpleDenoiser",
    "VideoPatchifier",
    "add_noise",
    "distilled_sigmas",
    "euler_ancestral_denoising_loop",
    "euler_denoising_loop",
    "gradient_estimation_denoising_loop",
    "projection_coef",
    "res2s_coefficients",
    "res2s_denoising_loop",
    "stage_2_distilled_sigmas",
]
