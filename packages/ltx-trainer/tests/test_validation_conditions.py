"""Every validation condition type: the trainer writes its sample, and the one-stage pipeline honours it.

The properties are checked on the pipeline's final latents and on what its denoiser is given, against
latents the test encodes itself with the pipelines' source encoders (`engine.source_latents`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import av
import pytest
import torch
from PIL import Image

from ltx_core.model.audio_vae import AUDIO_ENCODER, encode_audio
from ltx_core.types import AudioLatentShape, VideoPixelShape
from ltx_pipelines import TI2VidOneStagePipeline
from ltx_pipelines.engine.generation import AudioGeneration
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.source_latents import encode_audio_latent, encode_video_latent
from ltx_pipelines.io import frames_to_model_input, iter_video_frames, read_audio, write_video
from ltx_trainer.config import parse_config
from ltx_trainer.training.trainer import Trainer
from ltx_trainer.training.validation import ValidationRunner
from ltx_trainer.training.validation_conditions import (
    SampleGeometry,
    spatial_crop_cells,
    video_mask_cells,
    with_reference_beside,
)

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config, write_dataset

WIDTH = HEIGHT = 64
FRAMES = 17  # 3 latent frames of 2 x 2 cells
FPS = 24.0
PLACEMENT = Placement(torch.device("cpu"), torch.float32)
SHAPE = VideoPixelShape(1, FRAMES, HEIGHT, WIDTH, FPS)
AUDIO_STEPS = AudioLatentShape.from_video(SHAPE).frames


@pytest.fixture
def media(tmp_path, make_clip, make_image, make_wav):
    root = tmp_path / "media"
    clip = make_clip(root / "clip.mp4", frames=25, height=96, width=80)  # longer and larger than the sample
    image = make_image(root / "first.png", height=80, width=64)
    wav = make_wav(root / "tone.wav", seconds=1.0)
    mask_image = root / "left_half.png"
    pixels = torch.zeros(HEIGHT, WIDTH, 3, dtype=torch.uint8)
    pixels[:, : WIDTH // 2] = 255
    Image.fromarray(pixels.numpy()).save(mask_image)
    audio_mask = root / "first_half.pt"
    torch.save(torch.tensor([1.0] * 10 + [0.0] * 10), audio_mask)
    return {"clip": clip, "image": image, "wav": wav, "mask_image": mask_image, "audio_mask": audio_mask}


def _cases(m: dict[str, Path]) -> dict[str, list[dict]]:
    return {
        "first_frame": [{"type": "first_frame", "image_or_video": str(m["image"])}],
        "prefix_video": [{"type": "prefix", "video": str(m["clip"]), "num_frames": 9}],
        "suffix_video": [{"type": "suffix", "video": str(m["clip"]), "num_frames": 8}],
        "prefix_audio": [{"type": "prefix", "audio": str(m["wav"]), "duration": 0.32}],
        "suffix_audio": [{"type": "suffix", "audio": str(m["wav"]), "duration": 0.32}],
        "spatial_crop": [{"type": "spatial_crop", "video": str(m["clip"]), "spatial_region": [0, 0, 32, 64]}],
        "mask_video": [{"type": "mask", "video": str(m["clip"]), "mask": str(m["mask_image"])}],
        "mask_audio": [{"type": "mask", "audio": str(m["wav"]), "mask": str(m["audio_mask"])}],
        "reference_video": [
            {"type": "reference", "video": str(m["clip"]), "downscale_factor": 2, "include_in_output": True}
        ],
        "reference_audio": [{"type": "reference", "audio": str(m["wav"])}],
        "video_to_audio": [{"type": "video_to_audio", "video": str(m["clip"])}],
        "audio_to_video": [{"type": "audio_to_video", "audio": str(m["wav"])}],
        "first_frame_and_audio_suffix": [
            {"type": "first_frame", "image_or_video": str(m["clip"])},
            {"type": "suffix", "audio": str(m["wav"]), "duration": 0.2},
        ],
    }


def _config(tiny_models, tmp_path, conditions, **validation):
    data = write_dataset(tmp_path / "data", num_samples=2)
    samples = [{"prompt": "a white square", "conditions": conditions}]
    settings = {
        "interval": 2, "skip_initial_validation": True, "inference_steps": 2, "video_dims": [WIDTH, HEIGHT, FRAMES],
        "samples": samples, **validation,
    }  # fmt: skip
    raw = training_config(tiny_models.checkpoint, data, tmp_path / "out", validation=settings)
    raw["model"]["text_encoder_path"] = str(tiny_models.gemma_root)
    return parse_config(raw)


CASES = [
    "first_frame", "prefix_video", "suffix_video", "prefix_audio", "suffix_audio", "spatial_crop", "mask_video",
    "mask_audio", "reference_video", "reference_audio", "video_to_audio", "audio_to_video",
    "first_frame_and_audio_suffix",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_each_condition_type_writes_its_validation_sample(tiny_models, tmp_path, media, case):
    config = _config(tiny_models, tmp_path, _cases(media)[case])
    Trainer(config, disable_progress_bars=True).train()
    (written,) = sorted((tmp_path / "out" / "samples").iterdir())
    assert written.name == "step_000002_0.mp4"
    with av.open(str(written)) as container:
        video = container.streams.video[0]
        # include_in_output: the half-size reference (scaled to the output's height) sits to the left.
        assert (video.width, video.height) == ((2 * WIDTH if case == "reference_video" else WIDTH), HEIGHT)
        assert container.streams.audio, "the audio is muxed"
        assert sum(1 for _ in container.decode(video=0)) == FRAMES


def test_audio_only_samples_are_written_as_wav(tiny_models, tmp_path, media):
    conditions = [{"type": "prefix", "audio": str(media["wav"]), "duration": 0.2}]
    config = _config(tiny_models, tmp_path, conditions, generate_video=False)
    Trainer(config, disable_progress_bars=True).train()
    (written,) = sorted((tmp_path / "out" / "samples").iterdir())
    assert written.name == "step_000002_0.wav"
    assert read_audio(written).waveform.shape[-1] > 0


# -- the conditions are honoured ------------------------------------------------------------------


class RecordingDenoiser:
    """Delegates to the pipeline's denoiser and keeps the states it is given at the first step."""

    def __init__(self, inner) -> None:
        self.inner, self.first = inner, None

    def __call__(self, video, audio, sigma, step):
        if self.first is None:
            self.first = (video, audio)
        return self.inner(video, audio, sigma, step)


def _generate(tiny_models, tmp_path, conditions, **validation):
    """The sample generated through ValidationRunner.generate, and the states the denoiser first saw."""
    config = _config(tiny_models, tmp_path, conditions, **validation)
    pipeline = TI2VidOneStagePipeline(
        tiny_models.checkpoint, tiny_models.gemma_root, device="cpu", dtype=torch.float32, progress=False
    )
    recorder: dict[str, RecordingDenoiser] = {}
    build = pipeline.guided_stage_denoiser

    def recording(transformer, inputs):
        recorder["denoiser"] = RecordingDenoiser(build(transformer, inputs))
        return recorder["denoiser"]

    pipeline.guided_stage_denoiser = recording
    generation = ValidationRunner(config, tmp_path / "out", torch.device("cpu")).generate(pipeline, 0)
    return generation, recorder["denoiser"].first


def _clip_latent(checkpoint: Path, path: Path, frames: int) -> torch.Tensor:
    pixels = frames_to_model_input(torch.stack(list(iter_video_frames(path, max_frames=frames))), HEIGHT, WIDTH)
    return encode_video_latent(checkpoint, PLACEMENT, pixels, latent_frames=(frames - 1) // 8 + 1)


def _audio_latent(checkpoint: Path, wave: torch.Tensor, rate: int, steps: int | None = None) -> torch.Tensor:
    """The audio VAE's latent of `wave`: cut or padded to `steps`, or (None) as long as the encoder makes it."""
    if steps is not None:
        return encode_audio_latent(checkpoint, PLACEMENT, wave, rate, latent_frames=steps)
    with loaded(AUDIO_ENCODER, checkpoint, PLACEMENT) as encoder, torch.no_grad():
        return encode_audio(wave.unsqueeze(0), rate, encoder)


def _video(generation) -> torch.Tensor:
    return generation.latents["stage_1.video_latent"]


def _audio(generation) -> torch.Tensor:
    return generation.latents["stage_1.audio_latent"]


def test_first_frame_keeps_the_encoded_first_frame(tiny_models, tmp_path, media):
    conditions = [{"type": "first_frame", "image_or_video": str(media["clip"])}]
    generation, _ = _generate(tiny_models, tmp_path, conditions)
    torch.testing.assert_close(_video(generation)[:, :, :1], _clip_latent(tiny_models.checkpoint, media["clip"], 1))


def test_video_prefix_keeps_the_encoded_leading_frames(tiny_models, tmp_path, media):
    conditions = [{"type": "prefix", "video": str(media["clip"]), "num_frames": 9}]
    generation, (video, _) = _generate(tiny_models, tmp_path, conditions)
    torch.testing.assert_close(_video(generation)[:, :, :2], _clip_latent(tiny_models.checkpoint, media["clip"], 9))
    assert video.denoise_mask[0, :, 0].tolist() == [0.0] * 8 + [1.0] * 4  # 2 kept latent frames of 4 tokens


def test_video_suffix_keeps_the_last_latent_frames_of_the_whole_clip(tiny_models, tmp_path, media):
    conditions = [{"type": "suffix", "video": str(media["clip"]), "num_frames": 8}]
    generation, _ = _generate(tiny_models, tmp_path, conditions)
    # Encoded over the sample's frames (the encoder is causal), then the last latent frame kept.
    whole = _clip_latent(tiny_models.checkpoint, media["clip"], FRAMES)
    torch.testing.assert_close(_video(generation)[:, :, -1:], whole[:, :, -1:])
    assert not torch.allclose(_video(generation)[:, :, :1], whole[:, :, :1])


@pytest.mark.parametrize("kind", ["prefix", "suffix"])
def test_audio_prefix_and_suffix_keep_the_encoded_audio_steps(tiny_models, tmp_path, media, kind):
    conditions = [{"type": kind, "audio": str(media["wav"]), "duration": 0.32}]
    generation, (_, audio) = _generate(tiny_models, tmp_path, conditions)
    clip = read_audio(media["wav"])
    samples = round(0.32 * clip.sample_rate)
    wave = clip.waveform[:, :samples] if kind == "prefix" else clip.waveform[:, -samples:]
    expected = _audio_latent(tiny_models.checkpoint, wave, clip.sample_rate)
    kept = expected.shape[2]
    region = slice(0, kept) if kind == "prefix" else slice(AUDIO_STEPS - kept, AUDIO_STEPS)
    torch.testing.assert_close(_audio(generation)[:, :, region], expected)
    mask = audio.denoise_mask[0, :, 0]
    assert mask[region].eq(0).all() and mask.sum() == AUDIO_STEPS - kept


def test_spatial_crop_keeps_the_region_and_generates_the_rest(tiny_models, tmp_path, media):
    conditions = [{"type": "spatial_crop", "video": str(media["clip"]), "spatial_region": [0, 0, 32, 64]}]
    generation, _ = _generate(tiny_models, tmp_path, conditions)
    source = _clip_latent(tiny_models.checkpoint, media["clip"], FRAMES)
    out = _video(generation)
    torch.testing.assert_close(out[..., 0, :], source[..., 0, :])  # top row of cells: y in [0, 32)
    assert not torch.allclose(out[..., 1, :], source[..., 1, :])


def test_video_mask_keeps_the_white_part_of_the_mask(tiny_models, tmp_path, media):
    conditions = [{"type": "mask", "video": str(media["clip"]), "mask": str(media["mask_image"])}]
    generation, _ = _generate(tiny_models, tmp_path, conditions)
    source = _clip_latent(tiny_models.checkpoint, media["clip"], FRAMES)
    out = _video(generation)
    torch.testing.assert_close(out[..., 0], source[..., 0])  # left column of cells: white in the mask
    assert not torch.allclose(out[..., 1], source[..., 1])


def test_audio_mask_keeps_the_masked_steps(tiny_models, tmp_path, media):
    conditions = [{"type": "mask", "audio": str(media["wav"]), "mask": str(media["audio_mask"])}]
    generation, (_, audio) = _generate(tiny_models, tmp_path, conditions)
    clip = read_audio(media["wav"], max_duration=FRAMES / FPS)
    source = _audio_latent(tiny_models.checkpoint, clip.waveform, clip.sample_rate, AUDIO_STEPS)
    keep = audio.denoise_mask[0, :, 0] == 0
    # The 20-value mask resampled (nearest) to the audio steps: its first half is kept.
    assert keep.tolist() == [i < AUDIO_STEPS // 2 for i in range(AUDIO_STEPS)]
    out = _audio(generation)
    torch.testing.assert_close(out[:, :, keep], source[:, :, keep])
    assert not torch.allclose(out[:, :, ~keep], source[:, :, ~keep])


def test_reference_video_tokens_are_appended_for_the_transformer(tiny_models, tmp_path, media):
    conditions = [{"type": "reference", "video": str(media["clip"]), "downscale_factor": 2}]
    _, (video, _) = _generate(tiny_models, tmp_path, conditions)
    target = 3 * 2 * 2
    # Half size: 32 x 32 px is one cell per latent frame; 17 frames -> 3 latent frames.
    assert video.latent.shape[1] == target + 3
    frames = torch.stack(list(iter_video_frames(media["clip"], max_frames=FRAMES)))
    reference = encode_video_latent(
        tiny_models.checkpoint, PLACEMENT, frames_to_model_input(frames, HEIGHT // 2, WIDTH // 2), latent_frames=3
    )
    torch.testing.assert_close(video.latent[:, target:], reference.flatten(2).transpose(1, 2))  # clean
    assert video.denoise_mask[:, target:].eq(0).all()
    # Positions in target pixels: the half-size reference spans the same 64 x 64 frame.
    assert float(video.positions[0, 1, target:].max()) == HEIGHT


def test_reference_audio_tokens_are_appended(tiny_models, tmp_path, media):
    conditions = [{"type": "reference", "audio": str(media["wav"])}]
    _, (_, audio) = _generate(tiny_models, tmp_path, conditions)
    clip = read_audio(media["wav"], max_duration=FRAMES / FPS)
    reference = _audio_latent(tiny_models.checkpoint, clip.waveform, clip.sample_rate)
    assert audio.latent.shape[1] == AUDIO_STEPS + reference.shape[2]
    torch.testing.assert_close(audio.latent[:, AUDIO_STEPS:], reference.transpose(1, 2).flatten(2))


def test_video_to_audio_freezes_the_video_and_generates_audio(tiny_models, tmp_path, media):
    conditions = [{"type": "video_to_audio", "video": str(media["clip"])}]
    generation, (video, audio) = _generate(tiny_models, tmp_path, conditions)
    torch.testing.assert_close(_video(generation), _clip_latent(tiny_models.checkpoint, media["clip"], FRAMES))
    assert video.frozen and video.denoise_mask.eq(0).all()
    assert audio.denoise_mask.eq(1).all() and not audio.frozen


def test_audio_to_video_freezes_the_audio_and_generates_video(tiny_models, tmp_path, media):
    conditions = [{"type": "audio_to_video", "audio": str(media["wav"])}]
    generation, (video, audio) = _generate(tiny_models, tmp_path, conditions)
    clip = read_audio(media["wav"], max_duration=FRAMES / FPS)
    source = _audio_latent(tiny_models.checkpoint, clip.waveform, clip.sample_rate, AUDIO_STEPS)
    torch.testing.assert_close(_audio(generation), source)
    assert audio.frozen and video.denoise_mask.eq(1).all()


def test_without_video_the_stage_runs_audio_only(tiny_models, tmp_path, media):
    generation, (video, audio) = _generate(tiny_models, tmp_path, [], generate_video=False)
    assert isinstance(generation, AudioGeneration) and video is None and audio is not None



# -- the pieces ------------------------------------------------------------------------------------


def test_reference_beside_the_output_is_scaled_to_its_height_and_stretched_in_time():
    reference = torch.arange(5, dtype=torch.float32).view(5, 1, 1, 1).expand(5, 16, 16, 3) / 10  # frame i = i / 10
    chunks = [torch.ones(4, 32, 32, 3), torch.ones(5, 32, 32, 3)]
    out = list(with_reference_beside(iter(chunks), reference, temporal=2, num_frames=9))
    frames = torch.cat(out)
    assert frames.shape == (9, 32, 64, 3)
    # Frame 0 once, then each reference frame held for 2 output frames.
    assert [round(float(f[0, 0, 0]) * 10) for f in frames] == [0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert frames[:, :, 32:].eq(1).all()


def test_video_mask_groups_eight_frames_from_frame_zero_and_keeps_a_cell_if_any_frame_does(tmp_path):
    geometry = SampleGeometry(width=64, height=64, frames=17, fps=24.0)
    frames = torch.zeros(17, 64, 64, 3, dtype=torch.uint8)
    frames[8] = 255  # one white frame: the second group of 8 frames (8-15) is kept
    path = write_video(tmp_path / "mask.mp4", frames, fps=24.0, crf=0).path
    assert video_mask_cells(path, geometry)[0].flatten(1).amax(dim=1).tolist() == [0.0, 1.0, 0.0]
    still = tmp_path / "half.png"
    pixels = torch.zeros(64, 64, 3, dtype=torch.uint8)
    pixels[32:] = 255
    Image.fromarray(pixels.numpy()).save(still)
    assert video_mask_cells(still, geometry)[0, :, :, 0].tolist() == [[0.0, 1.0]] * 3


def test_spatial_crop_cells_round_the_region_to_whole_cells():
    latent = SampleGeometry(width=96, height=64, frames=9, fps=24.0).video_latent
    cells = spatial_crop_cells((0, 32, 64, 96), latent)
    assert cells.shape == (1, 2, 2, 3)
    assert cells[0, 0].tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    assert cells[0, 1].equal(cells[0, 0])
