"""LTX-2 pipelines: each module is runnable with `python -m ltx_pipelines.<name>`, and each has a class
for use from Python::

    from ltx_pipelines import DistilledPipeline, demo

    assets = demo.ensure_demo_assets()  # tiny random weights, or pass the released files
    pipeline = DistilledPipeline(assets.checkpoint, assets.spatial_upsampler, assets.gemma_root, dtype=torch.float32)
    generation = pipeline("A red fox in the snow", seed=10, height=128, width=192, num_frames=17, frame_rate=24)
    generation.save("fox.mp4")

Names load on first use, so running one pipeline does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "DistilledPipeline": "ltx_pipelines.pipelines.distilled",
    "TI2VidOneStagePipeline": "ltx_pipelines.pipelines.ti2vid_one_stage",
    "TI2VidTwoStagesPipeline": "ltx_pipelines.pipelines.ti2vid_two_stages",
    "TI2VidTwoStagesHQPipeline": "ltx_pipelines.pipelines.ti2vid_two_stages_hq",
    "T2AOneStagePipeline": "ltx_pipelines.pipelines.t2a_one_stage",
    "A2VidPipelineTwoStage": "ltx_pipelines.pipelines.a2vid_two_stage",
    "AudioInput": "ltx_pipelines.pipelines.a2vid_two_stage",
    "RetakePipeline": "ltx_pipelines.pipelines.retake",
    "RetakeRegion": "ltx_pipelines.pipelines.retake",
    "RetakeSource": "ltx_pipelines.pipelines.retake",
    "KeyframeInterpolationPipeline": "ltx_pipelines.pipelines.keyframe_interpolation",
    "ICLoraPipeline": "ltx_pipelines.pipelines.ic_lora",
    "LipDubPipeline": "ltx_pipelines.pipelines.lipdub",
    "DubItPipeline": "ltx_pipelines.pipelines.dubit",
    "HDRICLoraPipeline": "ltx_pipelines.pipelines.hdr_ic_lora",
    "DFRPipeline": "ltx_pipelines.pipelines.dfr",
    "DurationRange": "ltx_core.model.duration_head",
    "VideoRequest": "ltx_pipelines.engine.requests",
    "GuidanceRequest": "ltx_pipelines.engine.requests",
    "ModelFiles": "ltx_core.loader",
    "VideoReference": "ltx_pipelines.engine.ic_references",
    "Generation": "ltx_pipelines.engine.generation",
    "ImageCondition": "ltx_pipelines.engine.denoising_stage",
    "SeededNoise": "ltx_pipelines.engine.denoising_stage",
    "LoraSpec": "ltx_core.loader",
    "TilingConfig": "ltx_core.model.video_vae",
}
_SUBMODULES = ("demo",)

__all__ = sorted([*_EXPORTS, *_SUBMODULES])


_names, _dir = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted([*_dir(), *_SUBMODULES])


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"ltx_pipelines.{name}")
    return _names(name)
