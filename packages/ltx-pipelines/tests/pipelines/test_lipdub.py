"""`lipdub` on the tiny in-process models: the written clip follows the reference's length and rate,
the reference audio is appended before the clip and stage 2 keeps the stage-1 audio, and the command
line checks its own flags (exactly one LoRA, a decodable reference with audio). No golden fixture here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import ltx_pipelines.lipdub as lipdub
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.loader import LoraSpec, read_checkpoint_config
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import SeededNoise, run_denoising_stage
from ltx_pipelines.engine.ic_references import VideoReference
from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.lipdub import LipDubPipeline, LipDubReference, reference_timing

HEIGHT, WIDTH, REF_FRAMES, FPS = 128, 128, 12, 25  # 12 frames snap to 9


@pytest.fixture(scope="module")
def clips(tmp_path_factory, write_clip) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lipdub")
    text = folder / "not-a-video.mp4"
    text.write_text("no video here")
    return {
        "reference": write_clip(folder / "speech.mp4", frames=REF_FRAMES, height=96, width=96, fps=FPS),
        "silent": write_clip(folder / "silent.mp4", frames=REF_FRAMES, height=96, width=96, fps=FPS, audio_rate=None),
        "text": text,
    }


@pytest.fixture(scope="module")
def lip_dub_lora(tiny_checkpoint, write_tiny_lora, tmp_path_factory) -> Path:
    return write_tiny_lora(tiny_checkpoint, tmp_path_factory.mktemp("lora") / "dub.safetensors", scale=0.3)


def test_reference_timing_snaps_frames_to_8k_plus_1_and_reads_the_rate(clips):
    assert reference_timing(clips["reference"]) == (9, FPS)


def test_stage_2_keeps_the_stage_1_audio_and_the_reference_audio_precedes_the_clip(
    tiny_checkpoint, tiny_spatial_upsampler, lip_dub_lora, clips, monkeypatch
):
    initial_audio = []

    def recording_loop(denoiser, sigmas, video, audio, **kwargs):
        initial_audio.append(audio)
        return euler_denoising_loop(denoiser, sigmas, video, audio, **kwargs)

    # Both stages run through the shared two-stage runner.
    stage = "ltx_pipelines.engine.two_stage_runner.run_denoising_stage"
    monkeypatch.setattr(stage, lambda *a, **k: run_denoising_stage(*a, **{**k, "loop": recording_loop}))
    config = read_checkpoint_config(tiny_checkpoint)["transformer"]
    g = torch.Generator().manual_seed(0)
    contexts = TextContexts(
        video=torch.randn(1, 128, config["cross_attention_dim"], generator=g),
        audio=torch.randn(1, 128, config["audio_cross_attention_dim"], generator=g),
        mask=torch.ones(1, 128, dtype=torch.int64),
    )
    pipeline = LipDubPipeline(
        tiny_checkpoint, tiny_spatial_upsampler, None, lip_dub_lora=LoraSpec(lip_dub_lora, 1.0), device="cpu",
        dtype=torch.float32, progress=False,
    )  # fmt: skip
    frames, fps = reference_timing(clips["reference"])
    generation = pipeline.generate_from_contexts(
        contexts, video=VideoRequest(height=HEIGHT, width=WIDTH, num_frames=frames, frame_rate=fps),
        noise=SeededNoise(2), reference=LipDubReference(VideoReference(1.0, clips["reference"])),
    )  # fmt: skip
    stage_1_audio = generation.latents["stage_1.audio_latent"]
    torch.testing.assert_close(generation.latents["stage_2.audio_latent"], stage_1_audio, rtol=0, atol=0)
    initial_1, initial_2 = initial_audio
    target = stage_1_audio.shape[2]
    # Reference tokens were appended after the target, timed before 0 s; stage 2 froze everything.
    assert initial_1.latent.shape[1] > target
    assert float(initial_1.positions[0, 0, target:, 1].max()) < 0
    assert bool((initial_1.positions[0, 0, :target, 0] >= 0).all())
    assert initial_2.frozen and bool((initial_2.denoise_mask == 0).all())
    assert torch.cat(list(generation.frames)).shape == (frames, HEIGHT, WIDTH, 3)


def _argv(models, out: Path, reference: Path, *extra: str) -> list[str]:
    return [
        "--distilled-checkpoint-path", str(models.checkpoint), "--spatial-upsampler-path",
        str(models.spatial_upsampler), "--gemma-root", str(models.gemma_root), "--prompt", "she says hello",
        "--output-path", str(out), "--height", str(HEIGHT), "--width", str(WIDTH), "--device", "cpu",
        "--dtype", "float32", "--seed", "4", "--log-level", "WARNING", "--reference-video", str(reference), *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_cli_writes_the_reference_length_and_rate_with_audio_reproducibly(
    tiny_models, clips, lip_dub_lora, read_output, tmp_path
):
    written = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.mp4"
        assert lipdub.main(_argv(tiny_models, out, clips["reference"], "--lora", str(lip_dub_lora))) == 0
        written.append(read_output(out))
    first = written[0]
    assert first.frames.shape == (9, HEIGHT, WIDTH, 3)
    assert first.fps == FPS
    assert first.audio_channels == 2 and first.audio_samples > 0
    dests = {a.dest for a in lipdub.COMMAND.parser(LTX_2_3_DEFAULTS)._actions} - {"help", "log_level"}
    assert not dests - set(first.sidecar["parameters"]), "sidecar lacks parameters"
    assert first.sidecar["video"]["num_frames"] == 9 and first.sidecar["video"]["frame_rate"] == FPS
    np.testing.assert_array_equal(first.frames, written[1].frames)


class ModelBuilt(AssertionError):
    pass


@pytest.fixture
def no_model_building(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ModelBuilt("a model was built before the input was validated")

    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", refuse)
    monkeypatch.setattr("ltx_pipelines.demo.ensure_demo_assets", refuse)


INVALID = {
    "no_lora": ("reference", [], ["--lora was given 0 times", "exactly one"]),
    "two_loras": ("reference", ["--lora", "{lora}", "--lora", "{lora}"], ["--lora was given 2 times", "exactly one"]),
    "missing_reference": ("missing", ["--lora", "{lora}"], ["--reference-video", "no such file"]),
    "undecodable_reference": ("text", ["--lora", "{lora}"], ["--reference-video", "not a video that can be decoded"]),
    "reference_without_audio": ("silent", ["--lora", "{lora}"], ["--reference-video", "no audio track"]),
    "strength_above_1": (
        "reference",
        ["--lora", "{lora}", "--reference-strength", "1.5"],
        ["--reference-strength 1.5"],
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_cli_rejects_bad_input_before_building(
    case, tiny_models, clips, lip_dub_lora, tmp_path, no_model_building, capsys
):
    reference, extra, expected = INVALID[case]
    path = tmp_path / "missing.mp4" if reference == "missing" else clips[reference]
    out = tmp_path / "out" / "clip.mp4"
    with pytest.raises(SystemExit) as exit_info:
        lipdub.main(_argv(tiny_models, out, path, *(x.format(lora=lip_dub_lora) for x in extra)))
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    for text in expected:
        assert text in message, f"{text!r} not in {message!r}"
    assert not out.parent.exists()


def test_cli_guard_trips_once_the_input_is_valid(tiny_models, clips, lip_dub_lora, tmp_path, no_model_building, capsys):
    # Valid input reaches the guard (the run then fails with one error line, exit 1).
    argv = _argv(tiny_models, tmp_path / "clip.mp4", clips["reference"], "--lora", str(lip_dub_lora))
    assert lipdub.main(argv) == 1
    assert ModelBuilt.__name__ in capsys.readouterr().err
