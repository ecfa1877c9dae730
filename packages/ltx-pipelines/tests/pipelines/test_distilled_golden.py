"""The distilled pipeline, driven through its context/noise seam, reproduces `fx_pipeline_distilled`.

Every run in the fixture (text-only and with a conditioning image) is replayed from the stored text
contexts, conditioning pixels and noise; stage latents, the upsampled latent, the decoded frames
and the waveform are compared. Shapes, sigmas and tiling come from the fixture itself.
"""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.denoising_stage import ImageCondition, ReplayedNoise
from ltx_pipelines.engine.requests import VideoRequest

pytestmark = [pytest.mark.golden, pytest.mark.slow]


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_pipeline_distilled")


def _runs(fx) -> list[str]:
    runs = sorted(k.split(".")[0] for k in fx.params if k.endswith(".generator_draws"))
    assert runs, "the fixture lists no runs"
    return runs


def test_distilled_sigma_constants_match_the_fixture(fx):
    torch.testing.assert_close(distilled_sigmas(), torch.tensor(fx.params["stage_1_sigmas"]), rtol=0, atol=0)
    torch.testing.assert_close(stage_2_distilled_sigmas(), torch.tensor(fx.params["stage_2_sigmas"]), rtol=0, atol=0)


def test_distilled_pipeline_replays_the_reference(fx, golden_pipeline_models, assert_golden_close):
    """Every run of the set (however many, with or without an image) in one test, so none is left out;
    from the single file and from the diffusers folder of the same weights."""
    p = fx.params
    checkpoint, upsampler = golden_pipeline_models
    pipeline = DistilledPipeline(
        checkpoint,
        upsampler,
        gemma_root=None,
        device="cpu",
        dtype=torch.float32,
        tiling=TilingConfig.from_dict(p["tiling_config"]),
        progress=False,
    )
    for run in _runs(fx):
        _check_run(fx, p, pipeline, run, assert_golden_close)


def _check_run(fx, p, pipeline, run, assert_golden_close) -> None:
    images = []
    if f"{run}.image_stage_1" in fx:
        stage_1, stage_2 = fx[f"{run}.image_stage_1"], fx[f"{run}.image_stage_2"]
        images.append(
            ImageCondition(
                frame_idx=0,
                strength=p["image_strength"],
                pixels={tuple(stage_1.shape[-2:]): stage_1, tuple(stage_2.shape[-2:]): stage_2},
            )
        )
    video_context, audio_context = fx["video_context"], fx["audio_context"]
    contexts = TextContexts(
        video=video_context, audio=audio_context, mask=torch.ones(video_context.shape[:2], dtype=torch.int64)
    )
    prefix = f"{run}.noise."
    noise = ReplayedNoise(fx.tensors, prefix=prefix)
    size = {"height": p["height"], "width": p["width"], "num_frames": p["frames"], "frame_rate": p["fps"]}
    video = VideoRequest(**size, images=images)
    generation = pipeline.generate_from_contexts(contexts, video=video, noise=noise)
    for name in (
        "stage_1.video_latent",
        "stage_1.audio_latent",
        "upsampled_video_latent",
        "stage_2.video_latent",
        "stage_2.audio_latent",
    ):
        assert_golden_close(generation.latents[name], fx[f"{run}.{name}"], name=f"{run}.{name}")
    frames = torch.cat(list(generation.frames), dim=0)
    if f"{run}.video_frames" in fx:
        assert_golden_close(frames, fx[f"{run}.video_frames"], name=f"{run}.video_frames")
    else:
        assert list(frames.shape) == p[f"{run}.video_frames_shape"]
    assert generation.audio_sample_rate == p[f"{run}.audio_sampling_rate"]
    assert_golden_close(generation.audio, fx[f"{run}.audio_waveform"], name=f"{run}.audio_waveform")

    # Every stored draw was used exactly once (e.g. `decoder.<i>` of a timestep-conditioned decoder),
    # in the reference's order, the decoder's last.
    stored = set(noise.stored)
    assert sorted(noise.drawn) == sorted(stored), f"{run}: drew {noise.drawn}, stored {sorted(stored)}"
    listed = p[f"{run}.generator_draws"]
    assert [d for d in noise.drawn if d in listed] == [d for d in listed if d in stored], f"{run}: draw order"
    decoder = [i for i, d in enumerate(noise.drawn) if d.startswith("decoder.")]
    assert decoder == list(range(len(noise.drawn) - len(decoder), len(noise.drawn))), f"{run}: decoder noise last"
