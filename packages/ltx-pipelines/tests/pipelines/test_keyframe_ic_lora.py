"""`keyframe_interpolation` and `ic_lora` on the tiny in-process models: what they write, what their
conditioning does to the latents, and the command-line checks of their own flags (exit code 2, a message
naming the value, nothing built or written). No golden fixture is read here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import ltx_pipelines.ic_lora as ic_lora
import ltx_pipelines.keyframe_interpolation as keyframe_interpolation
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.loader import LoraSpec
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.denoising_stage import ImageCondition, SeededNoise
from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.ic_lora import ICLoraPipeline, VideoReference
from ltx_pipelines.keyframe_interpolation import KeyframeInterpolationPipeline

HEIGHT, WIDTH, FRAMES, FPS = 128, 128, 9, 24
LATENT_TOKENS = (FRAMES - 1) // 8 + 1  # per (h, w) cell


def _contexts(checkpoint: Path) -> TextContexts:
    """Random contexts of the widths the tiny transformer takes (no Gemma needed for the seam)."""
    from ltx_core.loader import read_checkpoint_config

    transformer = read_checkpoint_config(checkpoint)["transformer"]
    g = torch.Generator().manual_seed(3)
    video = torch.randn(1, 128, transformer["cross_attention_dim"], generator=g)
    audio = torch.randn(1, 128, transformer["audio_cross_attention_dim"], generator=g)
    return TextContexts(video=video, audio=audio, mask=torch.ones(1, 128, dtype=torch.int64))


class ShapeRecordingNoise(SeededNoise):
    """Seeded noise that also records the shape of each draw (token counts of each stage)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.shapes: dict[str, tuple[int, ...]] = {}

    def __call__(self, name: str, shape, *, device, dtype):  # type: ignore[override]
        self.shapes[name] = tuple(shape)
        return super().__call__(name, shape, device=device, dtype=dtype)


# ---- keyframe interpolation -------------------------------------------------------------------------


UNGUIDED_2_STEPS = GuidanceRequest(
    num_inference_steps=2, video=MultiModalGuiderParams(), audio=MultiModalGuiderParams()
)


class KeyframeProbe(KeyframeInterpolationPipeline):
    """Records each stage's final token state (before the appended tokens are dropped)."""

    final_states: dict[str, Any]

    def sampling_loop(self, stage, sde_noise):
        def loop(denoiser, sigmas, video, audio, **kwargs):
            video, audio = euler_denoising_loop(denoiser, sigmas, video, audio, **kwargs)
            self.final_states[stage] = video
            return video, audio

        return loop


def test_keyframe_tokens_are_kept_clean_and_removed_before_decoding(
    tiny_checkpoint, tiny_spatial_upsampler, write_test_image, tmp_path
):
    image = write_test_image(tmp_path / "key.png", width=128, height=128)
    pipeline = KeyframeProbe(
        tiny_checkpoint, tiny_spatial_upsampler, None, distilled_lora=None, device="cpu", dtype=torch.float32,
        progress=False,
    )  # fmt: skip
    pipeline.final_states = {}
    noise = ShapeRecordingNoise(5)
    keyframes = [
        ImageCondition(frame_idx=0, strength=1.0, path=image),
        ImageCondition(frame_idx=8, strength=1.0, path=image),
    ]
    generation = pipeline.generate_from_contexts(
        _contexts(tiny_checkpoint), None,
        video=VideoRequest(height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=FPS, images=keyframes),
        noise=noise, guidance=UNGUIDED_2_STEPS,
    )  # fmt: skip
    for stage, (h, w) in (("stage_1", (HEIGHT // 64, WIDTH // 64)), ("stage_2", (HEIGHT // 32, WIDTH // 32))):
        target = LATENT_TOKENS * h * w
        appended = 2 * h * w  # one latent frame per keyframe
        # The keyframes were appended (both of them, frame 0 included) and drawn noise for ...
        assert noise.shapes[f"{stage}.video"][1] == target + appended
        state = pipeline.final_states[stage]
        assert state.latent.shape[1] == target + appended
        # ... stayed exactly at their encoded latent at strength 1 (denoise mask 0) ...
        torch.testing.assert_close(state.latent[:, target:], state.clean_latent[:, target:], rtol=0, atol=0)
        assert bool((state.denoise_mask[:, target:] == 0).all())
        # ... the keyframe at frame 8 is timed at 8 / fps ...
        times = state.positions[0, 0, target + h * w :, 0]
        assert torch.allclose(times, torch.full_like(times, 8 / FPS))
        # ... and only the generated grid came out of the stage.
        assert generation.latents[f"{stage}.video_latent"].shape[2:] == (LATENT_TOKENS, h, w)
    frames = torch.cat(list(generation.frames))
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    # The shipped audio is the one stage 2 refined.
    assert generation.audio is not None and "stage_2.audio_latent" in generation.latents


def test_the_plain_two_stage_pipeline_puts_an_image_in_the_grid(tiny_checkpoint, tiny_spatial_upsampler,
                                                                 write_test_image, tmp_path):  # fmt: skip
    """The same frame-0 image through `TI2VidTwoStagesPipeline`: no token is appended in either stage."""
    from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline

    image = write_test_image(tmp_path / "key.png", width=128, height=128)
    pipeline = TI2VidTwoStagesPipeline(
        tiny_checkpoint, tiny_spatial_upsampler, None, distilled_lora=None, device="cpu", dtype=torch.float32,
        progress=False,
    )  # fmt: skip
    noise = ShapeRecordingNoise(5)
    pipeline.generate_from_contexts(
        _contexts(tiny_checkpoint), None,
        video=VideoRequest(
            height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=FPS,
            images=[ImageCondition(frame_idx=0, strength=1.0, path=image)],
        ),
        noise=noise, guidance=UNGUIDED_2_STEPS,
    )  # fmt: skip
    for stage, (h, w) in (("stage_1", (HEIGHT // 64, WIDTH // 64)), ("stage_2", (HEIGHT // 32, WIDTH // 32))):
        assert noise.shapes[f"{stage}.video"][1] == LATENT_TOKENS * h * w, stage


def test_keyframe_at_frame_zero_is_appended_not_substituted(
    tiny_checkpoint, tiny_spatial_upsampler, write_test_image, tmp_path
):
    """The plain two-stage pipeline replaces frame 0's tokens; keyframe interpolation appends them."""
    image = write_test_image(tmp_path / "key.png", width=128, height=128)
    from ltx_core.conditioning import VideoConditionByKeyframeIndex, VideoConditionByLatentIndex
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.engine.denoising_stage import encode_conditioning_images
    from ltx_pipelines.engine.model_loading import Placement

    shape = VideoPixelShape(1, FRAMES, HEIGHT, WIDTH, FPS)
    images = [ImageCondition(frame_idx=0, strength=1.0, path=image)]
    placement = Placement(torch.device("cpu"), torch.float32)
    (plain,) = encode_conditioning_images(images, tiny_checkpoint, placement, [shape]).per_stage
    (keyed,) = encode_conditioning_images(images, tiny_checkpoint, placement, [shape], all_as_keyframes=True).per_stage
    assert isinstance(plain[0], VideoConditionByLatentIndex)
    assert isinstance(keyed[0], VideoConditionByKeyframeIndex) and keyed[0].frame_idx == 0


# ---- IC-LoRA ----------------------------------------------------------------------------------------


def _with_metadata(source: Path, target: Path, **metadata: str) -> Path:
    save_file(load_file(str(source)), str(target), metadata=dict(metadata))
    return target


@pytest.fixture(scope="module")
def ic_lora_file(tiny_checkpoint, write_tiny_lora, tmp_path_factory) -> Path:
    return write_tiny_lora(tiny_checkpoint, tmp_path_factory.mktemp("ic") / "ic.safetensors", scale=0.3)


def _run_ic(pipeline, checkpoint, **inputs):
    noise = ShapeRecordingNoise(11)
    video = VideoRequest(height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=FPS)
    generation = pipeline.generate_from_contexts(_contexts(checkpoint), video=video, noise=noise, **inputs)
    return generation, noise


def test_without_reference_and_at_lora_strength_zero_ic_lora_is_the_plain_distilled_run(
    tiny_checkpoint, tiny_spatial_upsampler, ic_lora_file
):
    common = {"device": "cpu", "dtype": torch.float32, "progress": False}
    plain = DistilledPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, **common)
    want, _ = _run_ic(plain, tiny_checkpoint)
    for ic_loras in ((), (LoraSpec(ic_lora_file, 0.0),)):
        pipeline = ICLoraPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, ic_loras=ic_loras, **common)
        got, _ = _run_ic(pipeline, tiny_checkpoint)
        assert got.latents.keys() == want.latents.keys()
        for name in want.latents:
            torch.testing.assert_close(got.latents[name], want.latents[name], rtol=0, atol=0, msg=name)
        torch.testing.assert_close(got.audio, want.audio, rtol=0, atol=0)
    # With the LoRA at strength 1 stage 1 changes: the comparison above can see a LoRA.
    strong = ICLoraPipeline(
        tiny_checkpoint, tiny_spatial_upsampler, None, ic_loras=(LoraSpec(ic_lora_file, 1.0),), **common
    )
    got, _ = _run_ic(strong, tiny_checkpoint)
    assert not torch.equal(got.latents["stage_1.video_latent"], want.latents["stage_1.video_latent"])


@pytest.mark.parametrize(("downscale", "temporal"), [(1, 1), (2, 1), (1, 2)])
def test_scale_factors_from_the_lora_metadata_size_the_reference_latent(
    tiny_checkpoint, tiny_spatial_upsampler, ic_lora_file, tmp_path, downscale, temporal
):
    lora = _with_metadata(
        ic_lora_file, tmp_path / "scaled.safetensors",
        reference_downscale_factor=str(downscale), reference_temporal_scale_factor=str(temporal),
    )  # fmt: skip
    pipeline = ICLoraPipeline(
        tiny_checkpoint, tiny_spatial_upsampler, None, ic_loras=(LoraSpec(lora, 1.0),), device="cpu",
        dtype=torch.float32, progress=False,
    )  # fmt: skip
    assert (pipeline.reference_downscale_factor, pipeline.reference_temporal_scale_factor) == (downscale, temporal)
    frames = 17  # two latent frames after x2 temporal subsampling
    h, w = HEIGHT // 2 // downscale, WIDTH // 2 // downscale
    reference = VideoReference(strength=1.0, pixels=torch.rand(1, 3, frames, h, w) * 2 - 1)
    noise = ShapeRecordingNoise(1)
    pipeline.generate_from_contexts(
        _contexts(tiny_checkpoint), video=VideoRequest(height=HEIGHT, width=WIDTH, num_frames=frames, frame_rate=FPS),
        noise=noise, references=[reference], skip_stage_2=True,
    )  # fmt: skip
    target = ((frames - 1) // 8 + 1) * (HEIGHT // 64) * (WIDTH // 64)
    ref_frames = (frames - 1) // 8 // temporal + 1
    ref_tokens = ref_frames * (h // 32) * (w // 32)
    assert noise.shapes["stage_1.video"][1] == target + ref_tokens


def test_attention_mask_values_outside_0_1_are_refused(tiny_checkpoint, tiny_spatial_upsampler):
    pipeline = ICLoraPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, device="cpu", dtype=torch.float32)
    reference = VideoReference(strength=1.0, pixels=torch.zeros(1, 3, FRAMES, HEIGHT // 2, WIDTH // 2))
    for bad in (1.5, -0.25):
        mask = torch.full((1, 1, FRAMES, HEIGHT // 2, WIDTH // 2), bad)
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            _run_ic(pipeline, tiny_checkpoint, references=[reference], attention_mask=mask)
    with pytest.raises(ValueError, match="attention_strength"):
        _run_ic(pipeline, tiny_checkpoint, references=[reference], attention_strength=1.2)


def test_attention_mask_becomes_per_token_weights_of_the_reference(tiny_checkpoint):
    from ltx_pipelines.engine.ic_references import mask_to_reference_tokens

    mask = torch.zeros(1, 1, 17, 64, 64)
    mask[:, :, 0, :, 32:] = 1.0  # first frame: right half
    mask[:, :, 9:17, :32, :] = 0.5  # last latent frame's pixel frames: left half at 0.5
    weights = mask_to_reference_tokens(mask, (1, 128, 3, 2, 2)).reshape(3, 2, 2)
    torch.testing.assert_close(weights[0], torch.tensor([[0.0, 1.0], [0.0, 1.0]]))
    torch.testing.assert_close(weights[1], torch.zeros(2, 2))
    torch.testing.assert_close(weights[2], torch.tensor([[0.5, 0.5], [0.0, 0.0]]))


# ---- command lines ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def media(tmp_path_factory, write_clip, write_test_image) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("media")
    return {
        "reference": write_clip(folder / "reference.mp4", frames=FRAMES, height=96, width=112),
        "short_mask": write_clip(folder / "short_mask.mp4", frames=3, height=64, width=64, audio_rate=None),
        "image": write_test_image(folder / "key.png", width=128, height=128),
        "text": _text_file(folder / "not-media.mp4"),
    }


def _text_file(path: Path) -> Path:
    path.write_text("not a video")
    return path


def _base_argv(models, out: Path, *, distilled: bool) -> list[str]:
    checkpoint_flag = "--distilled-checkpoint-path" if distilled else "--checkpoint-path"
    argv = [
        checkpoint_flag, str(models.checkpoint), "--spatial-upsampler-path", str(models.spatial_upsampler),
        "--gemma-root", str(models.gemma_root), "--prompt", "a fox", "--output-path", str(out),
        "--height", str(HEIGHT), "--width", str(WIDTH), "--num-frames", str(FRAMES), "--frame-rate", str(FPS),
        "--device", "cpu", "--dtype", "float32", "--seed", "3", "--log-level", "WARNING",
    ]  # fmt: skip
    if not distilled:
        argv += ["--num-inference-steps", "2", "--video-stg-blocks", "0", "--audio-stg-blocks", "0"]
    return argv


def _check_written(read_output, path: Path, parser_dests: set[str], *, size=(HEIGHT, WIDTH)) -> Any:
    written = read_output(path)
    assert written.frames.shape == (FRAMES, *size, 3)
    assert written.fps == FPS
    assert written.audio_channels == 2 and written.audio_samples > 0
    missing = parser_dests - set(written.sidecar["parameters"])
    assert not missing, f"sidecar lacks {sorted(missing)}"
    return written


@pytest.mark.slow
def test_keyframe_cli_writes_video_audio_and_sidecar_reproducibly(
    tiny_models, media, ic_lora_file, read_output, tmp_path
):
    written = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.mp4"
        argv = _base_argv(tiny_models, out, distilled=False)
        argv += ["--image", str(media["image"]), "0", "1.0", "--image", str(media["image"]), "8", "0.8", "0"]
        argv += ["--distilled-lora", str(ic_lora_file), "0.5"]  # any LoRA of the tiny transformer
        assert keyframe_interpolation.main(argv) == 0
        dests = flag_dests(keyframe_interpolation.COMMAND.parser(LTX_2_3_DEFAULTS))
        written.append(_check_written(read_output, out, dests))
    np.testing.assert_array_equal(written[0].frames, written[1].frames)
    images = written[0].sidecar["parameters"]["images"]
    assert [(i["frame_idx"], i["strength"]) for i in images] == [(0, 1.0), (8, 0.8)]
    assert images[1]["crf"] == 0


@pytest.mark.slow
def test_ic_lora_cli_writes_video_audio_and_sidecar_reproducibly(
    tiny_models, media, ic_lora_file, read_output, tmp_path
):
    written = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.mp4"
        argv = [
            *_base_argv(tiny_models, out, distilled=True),
            "--lora", str(ic_lora_file), "--video-conditioning", str(media["reference"]), "1.0",
            "--conditioning-attention-mask", str(media["image"]), "0.5",
        ]  # fmt: skip
        assert ic_lora.main(argv) == 0
        written.append(_check_written(read_output, out, flag_dests(ic_lora.COMMAND.parser(LTX_2_3_DEFAULTS))))
    np.testing.assert_array_equal(written[0].frames, written[1].frames)
    p = written[0].sidecar["parameters"]
    assert p["video_conditioning"] == [[str(media["reference"]), 1.0]]
    assert p["conditioning_attention_mask"] == [str(media["image"]), "0.5"]


@pytest.mark.slow
def test_ic_lora_skip_stage_2_writes_the_half_size_stage_1_result(tiny_models, media, read_output, tmp_path):
    out = tmp_path / "half.mp4"
    argv = _base_argv(tiny_models, out, distilled=True)
    argv += ["--video-conditioning", str(media["reference"]), "0.7", "--skip-stage-2"]
    assert ic_lora.main(argv) == 0
    _check_written(read_output, out, set(), size=(HEIGHT // 2, WIDTH // 2))


def flag_dests(parser) -> set[str]:
    return {a.dest for a in parser._actions if a.dest not in ("help", "log_level")}


class ModelBuilt(AssertionError):
    pass


@pytest.fixture
def no_model_building(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ModelBuilt("a model was built before the input was validated")

    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", refuse)
    monkeypatch.setattr("ltx_pipelines.demo.ensure_demo_assets", refuse)


def _rejected(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


IC_LORA_INVALID = {
    "no_reference": ([], ["--video-conditioning", "required"]),
    "missing_reference": (["--video-conditioning", "{tmp}/nope.mp4", "1.0"], ["{tmp}/nope.mp4", "no such file"]),
    "undecodable_reference": (["--video-conditioning", "{text}", "1.0"], ["{text}", "decoded"]),
    "reference_strength_above_1": (["--video-conditioning", "{ref}", "1.5"], ["STRENGTH 1.5", "[0, 1]"]),
    "mask_strength_above_1": (
        ["--video-conditioning", "{ref}", "1.0", "--conditioning-attention-mask", "{image}", "1.5"],
        ["--conditioning-attention-mask", "STRENGTH 1.5", "[0, 1]"],
    ),
    "mask_strength_negative": (
        ["--video-conditioning", "{ref}", "1.0", "--conditioning-attention-mask", "{image}", "-0.1"],
        ["STRENGTH -0.1", "[0, 1]"],
    ),
    "mask_undecodable": (
        ["--video-conditioning", "{ref}", "1.0", "--conditioning-attention-mask", "{text}", "0.5"],
        ["--conditioning-attention-mask", "{text}", "decoded"],
    ),
    "mask_too_short": (
        ["--video-conditioning", "{ref}", "1.0", "--conditioning-attention-mask", "{short}", "0.5"],
        ["{short}", "3 frames", "--num-frames 9"],
    ),
    "downscale_needs_larger_multiple": (
        ["--video-conditioning", "{ref}", "1.0", "--lora", "{scaled}"],
        ["reference_downscale_factor", "multiples of 256"],
    ),
}


@pytest.mark.parametrize("case", sorted(IC_LORA_INVALID))
def test_ic_lora_cli_rejects_bad_input_before_building(
    case, tiny_models, media, ic_lora_file, tmp_path, no_model_building, capsys
):
    scaled = _with_metadata(ic_lora_file, tmp_path / "x4.safetensors", reference_downscale_factor="4")
    extra, expected = IC_LORA_INVALID[case]
    names = {"tmp": tmp_path, "text": media["text"], "ref": media["reference"], "image": media["image"],
             "short": media["short_mask"], "scaled": scaled}  # fmt: skip
    out = tmp_path / "out" / "clip.mp4"
    argv = _base_argv(tiny_models, out, distilled=True) + [x.format(**names) for x in extra]
    message = _rejected(ic_lora.main, argv, capsys)
    for text in expected:
        assert text.format(**names) in message, f"{text.format(**names)!r} not in {message!r}"
    assert not out.parent.exists()


def test_ic_lora_cli_guard_trips_once_the_input_is_valid(tiny_models, media, tmp_path, no_model_building, capsys):
    # Valid input reaches the guard (the run then fails with one error line, exit 1).
    argv = _base_argv(tiny_models, tmp_path / "clip.mp4", distilled=True)
    assert ic_lora.main([*argv, "--video-conditioning", str(media["reference"]), "1.0"]) == 1
    assert ModelBuilt.__name__ in capsys.readouterr().err


def test_keyframe_cli_rejects_an_undecodable_image(tiny_models, media, tmp_path, no_model_building, capsys):
    argv = _base_argv(tiny_models, tmp_path / "clip.mp4", distilled=False)
    argv += ["--image", str(media["text"]), "4", "1.0", "--distilled-lora", str(media["image"])]
    message = _rejected(keyframe_interpolation.main, argv, capsys)
    assert str(media["text"]) in message and "not an image" in message


def test_a_prompt_call_refuses_inputs_the_pipeline_does_not_take_before_encoding(
    tiny_checkpoint, tiny_spatial_upsampler, tiny_gemma_root, monkeypatch
):
    pipeline = DistilledPipeline(tiny_checkpoint, tiny_spatial_upsampler, tiny_gemma_root, device="cpu")
    monkeypatch.setattr(pipeline, "encode_prompts", lambda *a, **k: pytest.fail("the prompt was encoded"))
    with pytest.raises(TypeError, match="references"):
        video = VideoRequest(height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=FPS)
        pipeline("a fox", seed=1, video=video, references=[])
