"""`python -m ltx_pipelines.dfr --demo --demo-family ltx-2.5` on the CPU: one temporal round with the demo set's
temporal upsampler gives (frames - 1) * 2 + 1 frames at twice the frame rate, the detailing stage uses the demo
set's detailing IC-LoRA, a `--distilled-lora` is recorded with the run; bad flags are refused first."""

from __future__ import annotations

import json

import av
import pytest

from ltx_pipelines import dfr
from ltx_pipelines.engine.dfr_layout import output_frames
from ltx_pipelines.engine.requests import VideoRequest

pytestmark = pytest.mark.slow

PROMPT = "A red fox runs through fresh snow at dawn"


@pytest.fixture
def demo_home(monkeypatch, ltx25_demo_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    return ltx25_demo_home


def _argv(output) -> list[str]:
    return ["--demo", "--demo-family", "ltx-2.5", "--prompt", PROMPT, "--output-path", str(output), "--device", "cpu"]


def test_demo_runs_a_temporal_round(demo_home, ltx25_demo, write_tiny_lora, tmp_path):
    output = tmp_path / "fox.mp4"
    # A dev transformer's distilled LoRA (any LoRA of the demo transformer's widths will do for the flags).
    lora = write_tiny_lora(ltx25_demo.transformer, tmp_path / "distilled-lora.safetensors", scale=0.1)
    # The smallest size the flags take (a 1x1 latent in stage 1, single keyframes upsampled on their own).
    argv = ["--num-frames", "9", "--frame-rate", "12", "--temporal-upsample-rounds", "1", "--height", "64"]
    argv += ["--width", "64"]
    assert dfr.main([*_argv(output), *argv, "--distilled-lora", str(lora), "0.5"]) == 0
    with av.open(str(output)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(video=0))
        rate = float(stream.average_rate)
    assert frames == output_frames(9, 1) == 17
    assert rate == 24.0
    sidecar = json.loads(output.with_suffix(".json").read_text())
    parameters = sidecar["parameters"]
    # Stage 1's audio spans the padded 25-frame canvas at 12 fps (2.08 s): it is cut to the video's 17 / 24 s.
    audio = sidecar["audio"]
    assert audio["samples"] == round(17 / 24 * audio["sample_rate"])
    assert parameters["temporal_upsample_rounds"] == 1
    assert parameters["temporal_upsampler_path"] == str(ltx25_demo.temporal_upsampler)
    assert parameters["detailing_lora"] == [[str(ltx25_demo.detailing_ic_lora), 1.0]]
    assert parameters["distilled_lora"] == {"path": str(lora), "strength": 0.5}
    assert sidecar["model_files"]["distilled_lora"]["path"] == str(lora)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--temporal-upsample-rounds", "3"], "invalid choice: 3"),
        (["--num-frames", "10"], "--num-frames"),
        (["--detailing-lora", "missing.safetensors"], "--detailing-lora 'missing.safetensors': no such file"),
        (["--distilled-lora", "missing.safetensors"], "--distilled-lora 'missing.safetensors': no such file"),
        (["--temporal-upsampler-path", "nope.safetensors"], "--temporal-upsampler-path 'nope.safetensors'"),
    ],
)
def test_bad_flags_are_refused_before_building(demo_home, tmp_path, capsys, extra, message):
    output = tmp_path / "fox.mp4"
    try:
        code = dfr.main([*_argv(output), *extra])
    except SystemExit as e:  # argparse's own refusals (choices)
        code = e.code
    assert code != 0
    assert message in capsys.readouterr().err
    assert not output.exists()


def test_a_first_frame_image_pins_the_first_latent_frame_of_every_stage(ltx25_demo):
    """At strength 1 the image's latent stays clean: stage 1, stage 2 and the first tile of the temporal round
    start with it (each at its own size)."""
    import torch

    from ltx_core.loader import build_model
    from ltx_core.model.video_vae import VIDEO_ENCODER
    from ltx_pipelines.dfr import DFRPipeline
    from ltx_pipelines.engine.denoising_stage import ImageCondition

    height, width = 128, 128
    generator = torch.Generator().manual_seed(3)
    pixels = {
        (h, w): torch.rand(1, 3, 1, h, w, generator=generator) * 2 - 1
        for h, w in ((height // 2, width // 2), (height, width))
    }
    image = ImageCondition(frame_idx=0, strength=1.0, pixels=pixels)
    files = ltx25_demo.model_files()
    pipeline = DFRPipeline(
        files, ltx25_demo.spatial_upsampler, None, temporal_upsampler_path=ltx25_demo.temporal_upsampler,
        device="cpu", dtype=torch.float32, progress=False,
    )  # fmt: skip
    video = VideoRequest(height=height, width=width, num_frames=9, frame_rate=12.0, images=[image])
    final = pipeline.generate(PROMPT, seed=5, video=video, temporal_upsample_rounds=1)
    encoder = build_model(VIDEO_ENCODER, files, device="cpu", dtype=torch.float32)
    with torch.no_grad():
        half, full = (encoder(pixels[key]) for key in ((height // 2, width // 2), (height, width)))
    latents = final.stage_latents
    torch.testing.assert_close(latents["stage_1.video_latent"][:, :, :1], half, atol=1e-5, rtol=0)
    torch.testing.assert_close(latents["stage_2.video_latent"][:, :, :1], full, atol=1e-5, rtol=0)
    torch.testing.assert_close(latents["round_1.tile_0.video_latent"][:, :, :1], full, atol=1e-5, rtol=0)


def test_auto_duration_lets_the_head_pick_the_requested_length(demo_home, tmp_path):
    output = tmp_path / "fox.mp4"
    assert dfr.main([*_argv(output), "--auto-duration", "0.3", "0.4"]) == 0
    parameters = json.loads(output.with_suffix(".json").read_text())["parameters"]
    # [0.3 s, 0.4 s] at 24 fps holds one point of the 8k+1 grid: 9 frames, whatever the random head says.
    assert parameters["auto_duration"] == [0.3, 0.4]
    with av.open(str(output)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 9


def test_two_rounds_tile_and_anchor_as_the_layout_plans(ltx25_demo, monkeypatch):
    """Two temporal rounds: each round's tiles are the layout's (`plan_rounds`), and round 2 is anchored on
    round 1's seams and on the slots round 1 generated (each doubled), with those slots' latents."""
    import torch

    from ltx_core.loader import read_checkpoint_config
    from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
    from ltx_pipelines.dfr import DFRPipeline
    from ltx_pipelines.engine import dfr_layout
    from ltx_pipelines.engine.denoising_stage import SeededNoise

    anchors: list[tuple[int, torch.Tensor]] = []

    class RecordedAnchor(dfr.VideoConditionByKeyframeIndex):
        def __init__(self, keyframes, frame_idx, strength):
            anchors.append((frame_idx, keyframes))
            super().__init__(keyframes, frame_idx, strength)

    monkeypatch.setattr("ltx_pipelines.pipelines.dfr.VideoConditionByKeyframeIndex", RecordedAnchor)
    files = ltx25_demo.model_files()
    widths = read_checkpoint_config(files, "transformer")
    generator = torch.Generator().manual_seed(2)
    contexts = TextContexts(
        torch.randn(1, 8, widths["cross_attention_dim"], generator=generator),
        torch.randn(1, 8, widths["audio_cross_attention_dim"], generator=generator),
        torch.ones(1, 8, dtype=torch.int64),
    )
    pipeline = DFRPipeline(
        files, ltx25_demo.spatial_upsampler, None, temporal_upsampler_path=ltx25_demo.temporal_upsampler,
        device="cpu", dtype=torch.float32, progress=False,
    )  # fmt: skip
    monkeypatch.setattr(DFRPipeline, "_audio_cut_to_video", staticmethod(lambda final: final))
    video = VideoRequest(height=64, width=64, num_frames=9, frame_rate=12.0)
    final = pipeline.latents_from_contexts(
        contexts, video=video, noise=SeededNoise(4), seed=4, temporal_upsample_rounds=2
    )
    latents = final.stage_latents
    first, second = dfr_layout.plan_rounds(dfr_layout.plan_canvas(9), 2)
    for plan in (first, second):
        for t, tile in enumerate(plan.tiles):
            assert latents[f"round_{plan.index}.tile_{t}.video_latent"].shape[2] == tile.latent_frames
            assert latents[f"round_{plan.index}.tile_{t}.video_generated_keyframes"].shape[2] == len(tile.slots)
        assert f"round_{plan.index}.tile_{len(plan.tiles)}.video_latent" not in latents
    # Round 1 anchors its one tile on the doubled canvas keyframe; round 2 its tiles on the doubled seams and
    # slots of round 1, the slot carried as round 1's tile generated it.
    round_1 = [frame for frame, _ in anchors[: len(first.tiles[0].anchors)]]
    assert round_1 == list(first.tiles[0].local(first.tiles[0].anchors))
    round_2 = anchors[len(first.tiles[0].anchors) :]
    want = [(t, p) for t in second.tiles for p in t.anchors]
    assert [frame for frame, _ in round_2] == [t.local((p,))[0] for t, p in want]
    slot = latents["round_1.tile_0.video_generated_keyframes"][:, :, :1]
    carried = [k for (_, k), (_, p) in zip(round_2, want, strict=True) if p == 2 * first.tiles[0].slots[0]]
    assert carried and all(torch.equal(k, slot) for k in carried)
