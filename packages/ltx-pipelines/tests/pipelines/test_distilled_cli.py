"""`python -m ltx_pipelines.distilled` end to end: the written mp4 and sidecar, reproducibility, image
and LoRA conditioning, every rejected input (exit code 2, nothing built, nothing written), the demo
mode and what a failure part-way leaves on disk.

The model runs use the tiny model set built in-process (the demo models: checkpoint, upsampler and
Gemma), at a small size; runs are cached per module and shared by the tests that look at them. No
test here reads the golden fixtures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import torch

import ltx_pipelines.distilled as distilled
import ltx_pipelines.engine.generation as decoding
from ltx_core.loader import read_safetensors_header
from ltx_pipelines.distilled import DistilledPipeline, main
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.requests import VideoRequest

HEIGHT, WIDTH, FRAMES, FPS, SEED = 128, 128, 9, 25, 7
PROMPT = "A red fox trots across a snowy field while wind hisses through the pines."
AAC_FRAME = 1024  # samples per AAC frame: the granularity of the audio stream's length


# ---- reading what a run wrote -------------------------------------------------------------------


@dataclass(frozen=True)
class Decoded:
    frames: np.ndarray  # (F, H, W, 3) uint8
    fps: Fraction
    video_codec: str
    video_seconds: float
    audio: np.ndarray  # (channels, samples) float32
    audio_codec: str
    audio_rate: int
    audio_layout: str
    audio_seconds: float


def decode_mp4(path: Path) -> Decoded:
    with av.open(str(path)) as container:
        assert len(container.streams.video) == 1 and len(container.streams.audio) == 1
        video, audio = container.streams.video[0], container.streams.audio[0]
        video_seconds = float(video.duration * video.time_base)
        audio_seconds = float(audio.duration * audio.time_base)
        fps, video_codec = video.average_rate, video.codec_context.name
        audio_codec, audio_rate, layout = audio.codec_context.name, audio.rate, audio.layout.name
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
        container.seek(0)
        chunks = [f.to_ndarray() for f in container.decode(audio=0)]
    # AAC decodes to planar float: one row per channel.
    samples = np.concatenate(chunks, axis=-1).astype(np.float32)
    return Decoded(frames, fps, video_codec, video_seconds, samples, audio_codec, audio_rate, layout, audio_seconds)


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` (hidden and partial ones included) with its content."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Run:
    video: Path
    sidecar: dict[str, Any]
    decoded: Decoded


class CliRunner:
    """Runs `main()` on the tiny model files, each distinct run once per module."""

    def __init__(self, folder: Path, checkpoint: Path, upsampler: Path, gemma_root: Path) -> None:
        self.folder = folder
        self.checkpoint = checkpoint
        self.upsampler = upsampler
        self.gemma_root = gemma_root
        self._runs: dict[str, Run] = {}

    def argv(self, output: Path, *extra: str, **flags: Any) -> list[str]:
        values = {
            "--distilled-checkpoint-path": self.checkpoint,
            "--spatial-upsampler-path": self.upsampler,
            "--gemma-root": self.gemma_root,
            "--prompt": PROMPT,
            "--height": HEIGHT,
            "--width": WIDTH,
            "--num-frames": FRAMES,
            "--frame-rate": FPS,
            "--seed": SEED,
            "--dtype": "float32",
            "--device": "cpu",
            "--log-level": "WARNING",
            "--output-path": output,
        }
        for flag, value in flags.items():
            values["--" + flag.replace("_", "-")] = value
        argv = [str(x) for pair in ((k, v) for k, v in values.items() if v is not None) for x in pair]
        return argv + list(extra)

    def run(self, name: str, *extra: str, **flags: Any) -> Run:
        if name not in self._runs:
            video = self.folder / f"{name}.mp4"
            assert main(self.argv(video, *extra, **flags)) == 0
            sidecar = json.loads(video.with_suffix(".json").read_text())
            self._runs[name] = Run(video, sidecar, decode_mp4(video))
        return self._runs[name]


@pytest.fixture(scope="module")
def runner(tiny_checkpoint, tiny_spatial_upsampler, tiny_gemma_root, tmp_path_factory) -> CliRunner:
    return CliRunner(tmp_path_factory.mktemp("runs"), tiny_checkpoint, tiny_spatial_upsampler, tiny_gemma_root)


@pytest.fixture(scope="module")
def base_run(runner) -> Run:
    return runner.run("base")


# ---- the written video and sidecar --------------------------------------------------------------


@pytest.mark.slow
def test_video_has_the_requested_frames_size_and_rate(base_run):
    d = base_run.decoded
    assert d.video_codec == "h264"
    assert d.frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert d.fps == FPS
    assert d.video_seconds == pytest.approx(FRAMES / FPS, abs=1e-3)
    assert d.frames.std() > 1.0, "the decoded video is a flat colour"


@pytest.mark.slow
def test_audio_is_stereo_aac_as_long_as_the_waveform(base_run):
    d, audio = base_run.decoded, base_run.sidecar["audio"]
    assert d.audio_codec == "aac"
    assert d.audio_layout == "stereo" and d.audio.shape[0] == 2
    assert d.audio_rate == audio["sample_rate"]
    # The stream holds the vocoder's waveform: its length to within one AAC frame. (The video-length
    # match is checked by the `--demo` test below.)
    assert abs(d.audio_seconds - audio["samples"] / audio["sample_rate"]) <= AAC_FRAME / d.audio_rate
    assert np.abs(d.audio).max() > 0, "the audio stream is silent"


@pytest.mark.slow
def test_sidecar_records_prompt_parameters_files_and_versions(base_run, runner):
    s = base_run.sidecar
    assert s["output"] == base_run.video.name
    assert s["prompt"] == PROMPT
    p = s["parameters"]
    assert (p["seed"], p["height"], p["width"], p["num_frames"]) == (SEED, HEIGHT, WIDTH, FRAMES)
    assert p["frame_rate"] == FPS and p["dtype"] == "float32" and p["device"] == "cpu"
    assert p["distilled_checkpoint_path"] == str(runner.checkpoint)
    metadata_version = read_safetensors_header(runner.checkpoint).metadata.get("model_version")
    if metadata_version is not None:
        assert p["model_version"] == str(metadata_version)
    assert s["video"] == {"num_frames": FRAMES, "height": HEIGHT, "width": WIDTH, "frame_rate": FPS}
    assert s["audio"]["samples"] > 0
    files = s["model_files"]
    for role, path in (("checkpoint", runner.checkpoint), ("spatial_upsampler", runner.upsampler)):
        assert files[role]["name"] == path.name
        assert files[role]["bytes"] == path.stat().st_size
    gemma_bytes = sum(f.stat().st_size for f in runner.gemma_root.rglob("*") if f.is_file())
    assert files["gemma_root"] == {"name": runner.gemma_root.name, "path": str(runner.gemma_root), "bytes": gemma_bytes}
    versions = s["versions"]
    for package in ("python", "torch", "av", "transformers", "ltx-core", "ltx-pipelines"):
        assert versions[package] and versions[package] != "not installed", package


# ---- reproducibility and conditioning -----------------------------------------------------------


@pytest.mark.slow
def test_same_seed_gives_the_same_video_and_audio(base_run, runner):
    again = runner.run("same_seed")
    np.testing.assert_array_equal(again.decoded.frames, base_run.decoded.frames)
    np.testing.assert_array_equal(again.decoded.audio, base_run.decoded.audio)
    same = {k: v for k, v in again.sidecar["parameters"].items() if k != "output_path"}
    assert same == {k: v for k, v in base_run.sidecar["parameters"].items() if k != "output_path"}


def _mean_abs_difference(a: Decoded, b: Decoded) -> float:
    return float(np.abs(a.frames.astype(np.float64) - b.frames.astype(np.float64)).mean())


@pytest.mark.slow
def test_another_seed_gives_another_video(base_run, runner):
    other = runner.run("other_seed", seed=SEED + 1)
    assert other.sidecar["parameters"]["seed"] == SEED + 1
    assert _mean_abs_difference(other.decoded, base_run.decoded) > 2.0


@pytest.mark.slow
def test_image_condition_changes_the_video(base_run, runner, write_test_image, tmp_path):
    image = write_test_image(tmp_path / "first.png", width=96, height=80)
    conditioned = runner.run("image", "--image", str(image), "0", "1.0")
    assert _mean_abs_difference(conditioned.decoded, base_run.decoded) > 2.0
    (recorded,) = conditioned.sidecar["parameters"]["images"]
    assert recorded["path"] == str(image) and recorded["frame_idx"] == 0 and recorded["strength"] == 1.0
    assert isinstance(recorded["crf"], int), "the CRF the run used (from the model version) is recorded"


@pytest.mark.slow
def test_lora_changes_the_video(base_run, runner, write_tiny_lora, tmp_path):
    lora = write_tiny_lora(runner.checkpoint, tmp_path / "style-lora.safetensors")
    adapted = runner.run("lora", "--lora", str(lora), "0.8")
    assert _mean_abs_difference(adapted.decoded, base_run.decoded) > 2.0
    assert adapted.sidecar["parameters"]["lora"] == [{"path": str(lora), "strength": 0.8}]
    assert adapted.sidecar["model_files"]["lora_0"]["name"] == lora.name
    assert adapted.sidecar["model_files"]["lora_0"]["bytes"] == lora.stat().st_size


# ---- rejected inputs ------------------------------------------------------------------------------


class ModelBuilt(AssertionError):
    """A model (or the demo set) was about to be built although the input should have been rejected."""


@pytest.fixture
def no_model_building(monkeypatch) -> None:
    """Fail loudly if anything heavy starts: the pipeline, the model builder, Gemma, the demo models."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ModelBuilt("a model was built before the input was validated")

    monkeypatch.setattr("ltx_pipelines.pipelines.distilled.DistilledPipeline", refuse)
    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", refuse)
    monkeypatch.setattr("ltx_core.text_encoders.gemma.text_encoder.GemmaTextEncoder.from_folder", refuse)
    monkeypatch.setattr("ltx_pipelines.demo.ensure_demo_assets", refuse)


@pytest.fixture
def workdir(tmp_path, write_test_image) -> Path:
    """A folder with a conditioning image and an empty output folder."""
    write_test_image(tmp_path / "image.png")
    (tmp_path / "not-an-image.png").write_text("just text")
    (tmp_path / "out").mkdir()
    return tmp_path


def _rejected(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


# (flag overrides, extra arguments, substrings the message must contain); "{tmp}", "{ckpt}" and
# "{ups}" are filled in per test.
INVALID_INPUTS = {
    "frames_not_8k_plus_1": ({"num_frames": 10}, [], ["--num-frames 10", "8k+1"]),
    "frames_zero": ({"num_frames": 0}, [], ["--num-frames 0", "8k+1"]),
    "height_not_multiple_of_64": ({"height": 100}, [], ["--height 100", "multiple of 64"]),
    "width_multiple_of_32_only": ({"width": 96}, [], ["--width 96", "multiple of 64"]),
    "missing_checkpoint": (
        {"distilled_checkpoint_path": "{tmp}/missing.safetensors"},
        [],
        ["--distilled-checkpoint-path", "{tmp}/missing.safetensors", "no such file"],
    ),
    "missing_gemma_folder": ({"gemma_root": "{tmp}/no-gemma"}, [], ["--gemma-root", "{tmp}/no-gemma"]),
    "gemma_flag_absent": ({"gemma_root": None}, [], ["--gemma-root", "required", "--demo"]),
    "missing_upsampler": (
        {"spatial_upsampler_path": "{tmp}/missing-x2.safetensors"},
        [],
        ["--spatial-upsampler-path", "{tmp}/missing-x2.safetensors", "no such file"],
    ),
    "checkpoint_given_as_upsampler": (
        {"spatial_upsampler_path": "{ckpt}"},
        [],
        ["--spatial-upsampler-path", "{ckpt}", "checkpoint", "not a latent upsampler"],
    ),
    "upsampler_given_as_checkpoint": (
        {"distilled_checkpoint_path": "{ups}"},
        [],
        ["--distilled-checkpoint-path", "{ups}", "latent upsampler", "not an LTX-2 single-file model checkpoint"],
    ),
    "missing_lora": ({}, ["--lora", "{tmp}/missing-lora.safetensors"], ["--lora", "{tmp}/missing-lora.safetensors"]),
    "checkpoint_given_as_lora": ({}, ["--lora", "{ckpt}"], ["--lora", "{ckpt}", "checkpoint", "not a LoRA"]),
    "image_strength_above_1": ({}, ["--image", "{tmp}/image.png", "0", "1.5"], ["STRENGTH 1.5", "[0, 1]"]),
    "image_strength_negative": ({}, ["--image", "{tmp}/image.png", "0", "-0.5"], ["STRENGTH -0.5", "[0, 1]"]),
    "image_frame_after_the_video": ({}, ["--image", "{tmp}/image.png", str(FRAMES), "1.0"], [f"FRAME_IDX {FRAMES}"]),
    "image_frame_negative": ({}, ["--image", "{tmp}/image.png", "-1", "1.0"], ["FRAME_IDX -1", ">= 0"]),
    "image_missing": ({}, ["--image", "{tmp}/nope.png", "0", "1.0"], ["--image", "{tmp}/nope.png", "no such file"]),
    "image_not_an_image": ({}, ["--image", "{tmp}/not-an-image.png", "0", "1.0"], ["not-an-image.png", "not an image"]),
}


@pytest.mark.parametrize("case", sorted(INVALID_INPUTS))
def test_invalid_input_exits_2_naming_the_value_before_building_or_writing(
    case, runner, workdir, no_model_building, capsys
):
    flags, extra, expected = INVALID_INPUTS[case]

    def fill(text: str) -> str:
        return text.format(tmp=workdir, ckpt=runner.checkpoint, ups=runner.upsampler)

    before = files_under(workdir)
    argv = runner.argv(
        workdir / "out" / "clip.mp4",
        *(fill(x) for x in extra),
        **{k: fill(v) if isinstance(v, str) else v for k, v in flags.items()},
    )
    message = _rejected(argv, capsys)
    for text in expected:
        assert fill(text) in message, f"{fill(text)!r} not in {message!r}"
    assert files_under(workdir) == before, "a rejected run wrote or changed files"


def test_the_model_guard_trips_once_the_input_is_valid(runner, workdir, no_model_building, capsys):
    # The rejection tests rely on this guard: with valid input the run reaches it (and fails with exit 1).
    assert main(runner.argv(workdir / "out" / "clip.mp4")) == 1
    assert "error: ModelBuilt: a model was built" in capsys.readouterr().err
    assert not any((workdir / "out").iterdir())


@pytest.mark.parametrize("existing", ["clip.mp4", "clip.json"])
def test_existing_output_is_refused_and_left_untouched(existing, runner, workdir, no_model_building, capsys):
    kept = workdir / "out" / existing
    kept.write_bytes(b"an earlier result")
    stamp = kept.stat().st_mtime_ns
    before = files_under(workdir)
    message = _rejected(runner.argv(workdir / "out" / "clip.mp4"), capsys)
    assert str(kept) in message and "--overwrite" in message
    assert files_under(workdir) == before
    assert kept.stat().st_mtime_ns == stamp


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--num-frames", "10"], "--num-frames 10"),
        (["--num-frames=10"], "--num-frames 10"),  # other spellings are the user's choice too, not
        (["--num-f", "10"], "--num-frames 10"),  # overridden by the demo's size
        (["--height", "96"], "--height 96"),
        (["--image", "{tmp}/image.png", "17", "1.0"], "FRAME_IDX 17"),  # the demo video has 17 frames
    ],
)
def test_demo_rejects_bad_values_before_building_the_demo_models(
    extra, expected, tmp_path, write_test_image, monkeypatch, no_model_building, capsys
):
    write_test_image(tmp_path / "image.png")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    output = tmp_path / "out" / "demo.mp4"
    extra = [x.format(tmp=tmp_path) for x in extra]
    message = _rejected(["--demo", "--prompt", "a cat", "--output-path", str(output), *extra], capsys)
    assert expected in message
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()


def test_python_api_rejects_bad_sizes_before_loading(runner, no_model_building):
    # `DistilledPipeline` here is the real class (imported before the guard replaced the module's name);
    # the guard still stops any model or Gemma load.
    pipeline = DistilledPipeline(runner.checkpoint, runner.upsampler, runner.gemma_root, device="cpu")
    for bad, value in (({"height": 100}, "100"), ({"width": 96}, "96"), ({"num_frames": 10}, "10")):
        sizes = {"height": HEIGHT, "width": WIDTH, "num_frames": FRAMES, "frame_rate": FPS} | bad
        with pytest.raises(ValueError, match=value):
            pipeline(PROMPT, seed=0, video=VideoRequest(**sizes))


# ---- failures part-way ---------------------------------------------------------------------------


@pytest.mark.slow
def test_failure_while_decoding_leaves_existing_outputs_untouched(runner, workdir, monkeypatch):
    video, sidecar = workdir / "out" / "clip.mp4", workdir / "out" / "clip.json"
    video.write_bytes(b"the previous video")
    sidecar.write_text('{"previous": true}')
    before = files_under(workdir)
    real_decode = decoding.decode_video_frames
    chunks_given = []

    def decode_then_fail(*args: Any, **kwargs: Any) -> Iterator[torch.Tensor]:
        for chunk in real_decode(*args, **kwargs):
            chunks_given.append(chunk.shape[0])
            yield chunk
            raise RuntimeError("decoder failed part-way")

    monkeypatch.setattr(decoding, "decode_video_frames", decode_then_fail)
    assert main(runner.argv(video, "--overwrite")) == 1
    assert chunks_given, "the failure should come after the first chunk was decoded"
    after = files_under(workdir)
    assert after.pop("out/clip.latents.safetensors"), "the denoised latents of the failed run were not kept"
    assert after == before, "the old files changed or a partial file was left"


def _fake_generation(frames: Iterator[torch.Tensor]) -> Generation:
    return Generation(
        frames=frames,
        num_frames=FRAMES,
        height=HEIGHT,
        width=WIDTH,
        frame_rate=FPS,
        audio=torch.zeros(2, 48000 * FRAMES // FPS),
        audio_sample_rate=48000,
        prompt=PROMPT,
    )


@pytest.fixture
def fake_pipeline(monkeypatch, tiny_models) -> Callable[[Callable[[], Generation]], None]:
    """Replace the pipeline's generation with small made-up latents and the decode step with `make()`
    (validation, saving the latents and writing stay real)."""
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
    from ltx_pipelines.engine.model_loading import Placement

    final = FinalLatents(
        video=torch.zeros(1, 128, 2, HEIGHT // 32, WIDTH // 32),
        audio=None,
        shape=VideoPixelShape(1, FRAMES, HEIGHT, WIDTH, FPS),
        checkpoint=tiny_models.checkpoint,
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=SeededNoise(0),
    )

    def install(make: Callable[[], Generation]) -> None:
        monkeypatch.setattr(distilled.DistilledPipeline, "generate", lambda self, *a, **k: final)
        monkeypatch.setattr(distilled.DistilledPipeline, "decode", lambda self, final: make())

    return install


def test_failure_while_decoding_leaves_only_the_latents(runner, workdir, fake_pipeline):
    def frames() -> Iterator[torch.Tensor]:
        yield torch.rand(5, HEIGHT, WIDTH, 3)
        raise RuntimeError("decoder failed part-way")

    fake_pipeline(lambda: _fake_generation(frames()))
    assert main(runner.argv(workdir / "out" / "clip.mp4")) == 1
    assert [p.name for p in (workdir / "out").iterdir()] == ["clip.latents.safetensors"]


def test_failed_sidecar_write_leaves_no_video(runner, workdir, fake_pipeline, monkeypatch):
    fake_pipeline(lambda: _fake_generation(iter([torch.rand(FRAMES, HEIGHT, WIDTH, 3)])))

    from ltx_pipelines.io import atomic_files

    real_json_text = atomic_files.json_text

    def disk_full_on_the_sidecar(value: Any, *args: Any, **kwargs: Any) -> str:
        # The latents file's metadata goes through the same helper: only the sidecar (it names the output) fails.
        if isinstance(value, dict) and "output" in value:
            raise OSError(28, "No space left on device")
        return real_json_text(value, *args, **kwargs)

    monkeypatch.setattr(atomic_files, "json_text", disk_full_on_the_sidecar)
    assert main(runner.argv(workdir / "out" / "clip.mp4")) == 1
    assert [p.name for p in (workdir / "out").iterdir()] == ["clip.latents.safetensors"]


def test_fake_generation_is_written_when_nothing_fails(runner, workdir, fake_pipeline):
    # Control for the two tests above: the same fake run, without a failure, writes both files.
    fake_pipeline(lambda: _fake_generation(iter([torch.rand(FRAMES, HEIGHT, WIDTH, 3)])))
    assert main(runner.argv(workdir / "out" / "clip.mp4")) == 0
    assert sorted(p.name for p in (workdir / "out").iterdir()) == ["clip.json", "clip.mp4"]
    assert decode_mp4(workdir / "out" / "clip.mp4").frames.shape == (FRAMES, HEIGHT, WIDTH, 3)


# ---- the demo -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_demo_writes_a_video_marked_random_and_reuses_its_cache(tmp_path, monkeypatch):
    import ltx_pipelines.demo.ltx23 as ltx23

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = tmp_path / "demo.mp4"
    assert main(["--demo", "--prompt", "a cat", "--output-path", str(first), "--log-level", "WARNING"]) == 0
    sidecar = json.loads(first.with_suffix(".json").read_text())
    assert "random" in sidecar["parameters"]["demo_weights"]
    checkpoint = Path(sidecar["model_files"]["checkpoint"]["path"])
    assert checkpoint.is_relative_to(tmp_path / "cache")
    decoded = decode_mp4(first)
    video = sidecar["video"]
    assert decoded.frames.shape == (video["num_frames"], video["height"], video["width"], 3)
    assert decoded.fps == Fraction(video["frame_rate"]).limit_denominator(1001)
    # The demo vocoder's hop fits its mel rate, so the audio lasts as long as the video.
    assert abs(decoded.audio_seconds - decoded.video_seconds) <= AAC_FRAME / decoded.audio_rate
    assert decoded.audio_layout == "stereo"

    cache = tmp_path / "cache"
    stamps = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}

    def rebuilt(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the demo cache was rebuilt although it was complete")

    for name in ("write_demo_checkpoint", "write_demo_upsampler", "write_demo_gemma"):
        monkeypatch.setattr(ltx23, name, rebuilt)
    second = tmp_path / "again.mp4"
    assert main(["--demo", "--prompt", "a cat", "--output-path", str(second), "--log-level", "WARNING"]) == 0
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()} == stamps
    np.testing.assert_array_equal(decode_mp4(second).frames, decoded.frames)


@pytest.mark.slow
def test_enhance_prompt_encodes_and_records_gemmas_rewrite(base_run, runner):
    enhanced = runner.run("enhanced", "--enhance-prompt")
    assert enhanced.sidecar["parameters"]["enhance_prompt"] is True
    rewritten = enhanced.sidecar["prompt"]
    assert isinstance(rewritten, str) and rewritten.strip()
    assert rewritten != PROMPT
    # The rewritten prompt is what was encoded, so the video differs from the plain prompt's.
    assert _mean_abs_difference(enhanced.decoded, base_run.decoded) > 0
