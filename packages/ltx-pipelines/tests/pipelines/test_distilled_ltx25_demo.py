"""`python -m ltx_pipelines.distilled --demo --demo-family ltx-2.5` on the CPU: the tiny LTX-2.5 component files
(diffusion video VAE decoder, duration head), the written video and sidecar, the length picked by the duration
head, and the saved latents decoded again by `python -m ltx_pipelines.decode` into the very same file."""

from __future__ import annotations

import json

import av
import pytest

from ltx_pipelines import decode, distilled

pytestmark = pytest.mark.slow

PROMPT = "A red fox runs through fresh snow at dawn"


@pytest.fixture
def demo_home(monkeypatch, ltx25_demo_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    return ltx25_demo_home


def frame_count(path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_demo_runs_on_ltx25_and_its_latents_decode_bit_identically(demo_home, ltx25_demo, tmp_path):
    output = tmp_path / "run" / "fox.mp4"
    argv = ["--demo", "--demo-family", "ltx-2.5", "--prompt", PROMPT, "--output-path", str(output), "--device", "cpu"]
    assert distilled.main([*argv, "--save-latents"]) == 0
    sidecar = json.loads(output.with_suffix(".json").read_text())
    parameters = sidecar["parameters"]
    assert parameters["demo_family"] == "ltx-2.5" and parameters["model_version"] == "2.5.1"
    # Without --num-frames the demo's duration head picks the length in its default range (README), as with
    # real LTX-2.5 files: the sidecar records the range and the length it picked.
    assert parameters["auto_duration"] == [1.0, 20.0]
    assert parameters["num_frames"] == frame_count(output) and (parameters["num_frames"] - 1) % 8 == 0
    files = sidecar["model_files"]
    for role, path in (
        ("transformer", ltx25_demo.transformer),
        ("text_encoder", ltx25_demo.text_encoder),
        ("video_vae", ltx25_demo.video_vae),
        ("audio_vae", ltx25_demo.audio_vae),
        ("duration_head", ltx25_demo.duration_head),
    ):
        assert files[role]["path"] == str(path), role
    # The saved latents decode again - through the diffusion decoder and its seeded noise - to the same bytes.
    latents = output.parent / "fox.latents.safetensors"
    again = tmp_path / "again" / "fox.mp4"
    assert decode.main(["--latents", str(latents), "--output-path", str(again)]) == 0
    assert again.read_bytes() == output.read_bytes()


def test_auto_duration_lets_the_head_pick_the_length_and_the_sidecar_records_it(demo_home, tmp_path):
    output = tmp_path / "fox.mp4"
    argv = ["--demo", "--demo-family", "ltx-2.5", "--prompt", PROMPT, "--output-path", str(output), "--device", "cpu"]
    assert distilled.main([*argv, "--auto-duration", "0.3", "0.4"]) == 0
    parameters = json.loads(output.with_suffix(".json").read_text())["parameters"]
    # [0.3 s, 0.4 s] at 24 fps holds one point of the 8k+1 grid: 9 frames, whatever the random head says.
    assert parameters["auto_duration"] == [0.3, 0.4]
    assert parameters["num_frames"] == 9 == frame_count(output)


def test_generate_takes_a_frame_count_or_a_duration_range(ltx25_demo):
    """Checked before any model is built: exactly one of the two, and a range only with a duration head."""
    import torch

    from ltx_core.model.duration_head import DurationRange
    from ltx_pipelines.distilled import DistilledPipeline
    from ltx_pipelines.engine.requests import VideoRequest

    size = {"height": 128, "width": 192, "frame_rate": 24.0}
    pipeline = DistilledPipeline(
        ltx25_demo.model_files(duration_head=False), ltx25_demo.spatial_upsampler, None, device="cpu",
        dtype=torch.float32,
    )  # fmt: skip
    with pytest.raises(ValueError, match="not both or neither"):
        pipeline.generate(PROMPT, seed=1, video=VideoRequest(num_frames=9, duration=DurationRange(), **size))
    with pytest.raises(ValueError, match="duration head"):
        pipeline.generate(PROMPT, seed=1, video=VideoRequest(duration=DurationRange(), **size))
