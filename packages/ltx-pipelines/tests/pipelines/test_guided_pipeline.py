"""The one guided pipeline (issue 34): every guided pipeline takes the same request values, checks them with the
one definition of guidance settings before any model loads, and the variants differ only in data and small
methods (guidance defaults, stage LoRAs, stage-1 sigmas). No denoising runs here: each check fails in
milliseconds, before Gemma or a transformer is read."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import LoraSpec
from ltx_pipelines import (
    A2VidPipelineTwoStage,
    GuidanceRequest,
    KeyframeInterpolationPipeline,
    RetakePipeline,
    T2AOneStagePipeline,
    TI2VidOneStagePipeline,
    TI2VidTwoStagesHQPipeline,
    TI2VidTwoStagesPipeline,
    VideoRequest,
)
from ltx_pipelines.engine.denoising_stage import StageConditions
from ltx_pipelines.engine.model_versions import LTX_2_3_HQ_DEFAULTS, defaults_for_checkpoint
from ltx_pipelines.pipelines.guided import GuidedPipeline, TwoStageGuidedPipeline

GUIDE = MultiModalGuiderParams(cfg_scale=2.0)


def _two_stage(cls, checkpoint, upsampler, **kwargs):
    return cls(checkpoint, upsampler, None, distilled_lora=None, device="cpu", **kwargs)


def test_every_guided_pipeline_is_the_one_guided_pipeline():
    for cls in (TI2VidOneStagePipeline, T2AOneStagePipeline, RetakePipeline):
        assert issubclass(cls, GuidedPipeline)
    for cls in (TI2VidTwoStagesPipeline, TI2VidTwoStagesHQPipeline, KeyframeInterpolationPipeline):
        assert issubclass(cls, TwoStageGuidedPipeline)
    for cls in (TI2VidOneStagePipeline, T2AOneStagePipeline, *TwoStageGuidedPipeline.__subclasses__()):
        if cls is A2VidPipelineTwoStage:  # takes its audio track besides the requests
            continue
        # generate and latents_from_contexts are written once, on the guided pipeline.
        assert cls.latents_from_contexts is GuidedPipeline.latents_from_contexts, cls
        assert cls.generate is GuidedPipeline.generate, cls
    assert issubclass(A2VidPipelineTwoStage, TwoStageGuidedPipeline)


def test_guidance_defaults_are_the_model_versions_or_the_hq_preset(tiny_checkpoint, tiny_spatial_upsampler):
    version = defaults_for_checkpoint(tiny_checkpoint)
    two = _two_stage(TI2VidTwoStagesPipeline, tiny_checkpoint, tiny_spatial_upsampler)
    hq = _two_stage(TI2VidTwoStagesHQPipeline, tiny_checkpoint, tiny_spatial_upsampler)
    settings = two.guidance_settings(GuidanceRequest())
    assert (settings.num_inference_steps, settings.video, settings.audio) == (
        version.num_inference_steps, version.video_guidance, version.audio_guidance,
    )  # fmt: skip
    preset = hq.guidance_settings(GuidanceRequest(audio=GUIDE))
    assert (preset.num_inference_steps, preset.video, preset.audio) == (
        LTX_2_3_HQ_DEFAULTS.num_inference_steps, LTX_2_3_HQ_DEFAULTS.video_guidance, GUIDE,
    )  # fmt: skip
    with pytest.raises(ValueError, match="num_inference_steps 1: TI2VidTwoStagesHQPipeline's sampler needs at least 2"):
        hq.guidance_settings(GuidanceRequest(num_inference_steps=1))
    retake = RetakePipeline(tiny_checkpoint, None, distilled=False, device="cpu")
    assert retake.guidance_settings(GuidanceRequest()).num_inference_steps == 40  # the reference's full retake


@pytest.mark.parametrize(
    ("make", "request_", "message"),
    [
        (
            lambda c, u: _two_stage(A2VidPipelineTwoStage, c, u),
            GuidanceRequest(audio=GUIDE),
            r"A2VidPipelineTwoStage does not guide that stream: \['audio guidance'\] not accepted",
        ),
        (
            lambda c, u: T2AOneStagePipeline(c, None, device="cpu"),
            GuidanceRequest(video=GUIDE),
            r"T2AOneStagePipeline does not guide that stream: \['video guidance'\] not accepted",
        ),
        (
            lambda c, u: RetakePipeline(c, None, device="cpu"),
            GuidanceRequest(num_inference_steps=4),
            r"the distilled retake runs without guidance: \['num_inference_steps'\] not accepted",
        ),
    ],
    ids=["a2vid-frozen-audio", "t2a-no-video", "distilled-retake"],
)
def test_a_stream_a_pipeline_does_not_guide_is_refused(
    tiny_checkpoint, tiny_spatial_upsampler, make, request_, message
):
    pipeline = make(tiny_checkpoint, tiny_spatial_upsampler)
    with pytest.raises(ValueError, match=message):
        pipeline.guidance_settings(request_)


def test_stage_loras_are_data_of_the_variant(tiny_checkpoint, tiny_spatial_upsampler, tmp_path):
    user, distilled = LoraSpec(tmp_path / "user.safetensors", 0.7), LoraSpec(tmp_path / "distilled.safetensors")
    options = {"device": "cpu", "loras": [user]}
    one = TI2VidOneStagePipeline(tiny_checkpoint, None, **options)
    two = TI2VidTwoStagesPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, distilled_lora=distilled, **options)
    hq = TI2VidTwoStagesHQPipeline(
        tiny_checkpoint, tiny_spatial_upsampler, None, distilled_lora=distilled, distilled_lora_strength_stage_1=0.25,
        distilled_lora_strength_stage_2=0.5, **options,
    )  # fmt: skip
    assert one.stage_loras() == ((user,),)
    assert two.stage_loras() == ((user,), (user, distilled))
    assert hq.stage_loras() == ((user, LoraSpec(distilled.path, 0.25)), (user, LoraSpec(distilled.path, 0.5)))


def test_bad_requests_fail_before_any_model_loads(tiny_checkpoint, tiny_spatial_upsampler, tmp_path):
    """The Gemma folder is empty: a call that got as far as encoding the prompt would fail on it instead."""
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    one = TI2VidOneStagePipeline(tiny_checkpoint, gemma, device="cpu")
    with pytest.raises(ValueError, match="does not predict the length"):
        one.generate("p", seed=1, video=VideoRequest(duration=(2.0, 4.0)))
    with pytest.raises(ValueError, match="num_inference_steps must be at least 1"):
        one.generate(
            "p", seed=1, video=VideoRequest(height=64, width=64), guidance=GuidanceRequest(num_inference_steps=0)
        )
    two = TI2VidTwoStagesPipeline(tiny_checkpoint, tiny_spatial_upsampler, gemma, distilled_lora=None, device="cpu")
    with pytest.raises(ValueError, match="multiple of 64"):
        two.generate("p", seed=1, video=VideoRequest(height=96, width=64, num_frames=9, frame_rate=24.0))
    small = VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0)
    with pytest.raises(ValueError, match="TI2VidTwoStagesPipeline takes no stage conditions"):
        two.generate("p", seed=1, video=small, conditions=StageConditions())
    with pytest.raises(ValueError, match="takes no stage conditions"):
        two.latents_from_contexts(
            None, None, video=VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0), noise=None,
            conditions=StageConditions(),
        )  # fmt: skip
    t2a = T2AOneStagePipeline(tiny_checkpoint, gemma, device="cpu")
    with pytest.raises(ValueError, match=r"T2AOneStagePipeline does not take \['generated_keyframes'\]"):
        t2a.generate("p", seed=1, video=VideoRequest(generated_keyframes=2))


def test_a_python_calls_sidecar_records_the_size_the_defaults_filled(tiny_checkpoint):
    pipeline = TI2VidOneStagePipeline(tiny_checkpoint, None, device="cpu", dtype=torch.float32)
    defaults = defaults_for_checkpoint(tiny_checkpoint)
    video = VideoRequest(height=64)
    recorded = pipeline.call_parameters(("p",), {"seed": 1, "video": video, "guidance": GuidanceRequest()}, None)
    assert (recorded["height"], recorded["width"], recorded["num_frames"], recorded["frame_rate"]) == (
        64, defaults.width, defaults.num_frames, defaults.frame_rate,
    )  # fmt: skip
    assert recorded["negative_prompt"] is None and recorded["seed"] == 1 and recorded["images"] == []
