"""Sampling components: patchifiers, schedules, noiser, guiders, diffusion steps, denoisers, loops."""

from __future__ import annotations

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "GuidedDenoiser": "ltx_core.components.denoisers",
    "SimpleDenoiser": "ltx_core.components.denoisers",
    "EulerAncestralStep": "ltx_core.components.diffusion_steps",
    "EulerStep": "ltx_core.components.diffusion_steps",
    "GradientEstimationEulerStep": "ltx_core.components.diffusion_steps",
    "Res2sStep": "ltx_core.components.diffusion_steps",
    "res2s_coefficients": "ltx_core.components.diffusion_steps",
    "APGGuider": "ltx_core.components.guiders",
    "CFGGuider": "ltx_core.components.guiders",
    "CFGStarGuider": "ltx_core.components.guiders",
    "GuiderSchedule": "ltx_core.components.guiders",
    "MultiModalGuider": "ltx_core.components.guiders",
    "MultiModalGuiderParams": "ltx_core.components.guider_params",
    "STGGuider": "ltx_core.components.guiders",
    "projection_coef": "ltx_core.components.guiders",
    "GaussianNoiser": "ltx_core.components.noisers",
    "add_noise": "ltx_core.components.noisers",
    "AudioPatchifier": "ltx_core.components.patchifiers",
    "VideoPatchifier": "ltx_core.components.patchifiers",
    "euler_ancestral_denoising_loop": "ltx_core.components.sampling",
    "euler_denoising_loop": "ltx_core.components.sampling",
    "gradient_estimation_denoising_loop": "ltx_core.components.sampling",
    "res2s_denoising_loop": "ltx_core.components.sampling",
    "DISTILLED_SIGMA_VALUES": "ltx_core.components.schedulers",
    "STAGE_2_DISTILLED_SIGMA_VALUES": "ltx_core.components.schedulers",
    "LTX2Scheduler": "ltx_core.components.schedulers",
    "distilled_sigmas": "ltx_core.components.schedulers",
    "stage_2_distilled_sigmas": "ltx_core.components.schedulers",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
