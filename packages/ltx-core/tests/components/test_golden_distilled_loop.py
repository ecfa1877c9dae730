"""Both distilled denoising stages against `fx_pipeline_distilled`, replaying the stored noise.

Stage 1 starts from pure noise at half resolution; stage 2 starts from the stored upsampled latent (and the
stored stage-1 audio) re-noised to the first stage-2 sigma. Runs with a conditioning image also need the
video encoder. Runs are discovered from params.<run>.generator_draws; a set without a run of one kind
skips that test.
"""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.noisers import add_noise
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.conditioning import VideoConditionByLatentIndex
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.loader import build_model
from ltx_core.model.transformer import AV_TRANSFORMER, X0Model
from ltx_core.model.video_vae import VIDEO_ENCODER
from ltx_core.types import VideoPixelShape

pytestmark = [pytest.mark.golden, pytest.mark.slow]


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_pipeline_distilled")


@pytest.fixture(scope="module")
def x0_model(golden_checkpoint):
    return X0Model(build_model(AV_TRANSFORMER, golden_checkpoint, dtype=torch.float32, device="cpu"))


def _runs(fx, with_image: bool) -> list[str]:
    runs = sorted(k.split(".")[0] for k in fx.params if k.endswith(".generator_draws"))
    assert runs, "fixture lists no runs"
    return [r for r in runs if (f"{r}.image_stage_1" in fx) == with_image]


def _stage(fx, x0_model, run, stage, pixel_shape, sigmas, video_latent, audio_latent, image_latent, noise_scale):
    video_tools = VideoLatentTools.from_pixel_shape(pixel_shape)
    audio_tools = AudioLatentTools.from_video(pixel_shape)
    video = video_tools.create_initial_state(initial_latent=video_latent)
    if image_latent is not None:
        video = VideoConditionByLatentIndex(image_latent, fx.params["image_strength"], 0).apply_to(video, video_tools)
    audio = audio_tools.create_initial_state(initial_latent=audio_latent)
    video = add_noise(video, fx[f"{run}.noise.{stage}.video"], noise_scale)
    audio = add_noise(audio, fx[f"{run}.noise.{stage}.audio"], noise_scale)
    denoiser = SimpleDenoiser(x0_model, fx["video_context"], fx["audio_context"])
    with torch.no_grad():
        video, audio = euler_denoising_loop(denoiser, sigmas, video, audio)
    return video_tools.state_to_latent(video), audio_tools.state_to_latent(audio)


def _check_run(fx, x0_model, run, assert_golden_close, encode=None):
    p = fx.params
    batch = fx["video_context"].shape[0]
    full = VideoPixelShape(batch, p["frames"], p["height"], p["width"], p["fps"])
    half = VideoPixelShape(batch, p["frames"], p["height"] // 2, p["width"] // 2, p["fps"])
    s1, s2 = torch.tensor(p["stage_1_sigmas"]), torch.tensor(p["stage_2_sigmas"])
    image_1 = encode(fx[f"{run}.image_stage_1"]) if encode else None
    # Stage 1 starts from pure noise (its first sigma).
    video, audio = _stage(fx, x0_model, run, "stage_1", half, s1, None, None, image_1, float(s1[0]))
    assert_golden_close(video, fx[f"{run}.stage_1.video_latent"], name=f"{run} stage 1 video")
    assert_golden_close(audio, fx[f"{run}.stage_1.audio_latent"], name=f"{run} stage 1 audio")

    image_2 = encode(fx[f"{run}.image_stage_2"]) if encode else None
    video, audio = _stage(
        fx,
        x0_model,
        run,
        "stage_2",
        full,
        s2,
        fx[f"{run}.upsampled_video_latent"],
        fx[f"{run}.stage_1.audio_latent"],
        image_2,
        float(s2[0]),
    )
    assert_golden_close(video, fx[f"{run}.stage_2.video_latent"], name=f"{run} stage 2 video")
    assert_golden_close(audio, fx[f"{run}.stage_2.audio_latent"], name=f"{run} stage 2 audio")


def test_distilled_stages_text_only(fx, x0_model, assert_golden_close, golden_lacks):
    runs = _runs(fx, with_image=False)
    if not runs:
        golden_lacks(f"{fx.path.name}: a run without a conditioning image")
    for run in runs:
        _check_run(fx, x0_model, run, assert_golden_close)


def test_distilled_stages_with_image(fx, x0_model, golden_checkpoint, assert_golden_close, golden_lacks):
    runs = _runs(fx, with_image=True)
    if not runs:
        golden_lacks(f"{fx.path.name}: a run with a conditioning image")
    encoder = build_model(VIDEO_ENCODER, golden_checkpoint, dtype=torch.float32, device="cpu")

    def encode(pixels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return encoder(pixels)

    for run in runs:
        _check_run(fx, x0_model, run, assert_golden_close, encode)
