"""decode_latents: precomputed latents back to mp4 / png / wav previews."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from ltx_pipelines.io import probe_video, read_audio
from ltx_trainer.decode_latents import app, decode_latents
from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.buckets import parse_buckets
from ltx_trainer.preprocessing.plan import PreprocessSettings
from ltx_trainer.preprocessing.run import preprocess_dataset


@pytest.fixture
def precomputed(tmp_path, make_clip, make_image, tiny_models):
    root = tmp_path / "data"
    make_clip(root / "clips" / "a.mp4", frames=17, height=64, width=96, fps=25)
    make_image(root / "still.png")
    rows = [{"video": "clips/a.mp4", "caption": "a"}, {"video": "still.png", "caption": "b"}]
    (root / "d.json").write_text(json.dumps(rows))
    settings = PreprocessSettings(
        model_path=tiny_models.checkpoint,
        text_encoder_path=tiny_models.gemma_root,
        resolution_buckets=tuple(parse_buckets("96x64x17;64x64x1")),
        device="cpu",
    )
    preprocess_dataset(root / "d.json", settings)
    return root / ".precomputed"


def test_decodes_videos_images_and_audio_mirroring_names(precomputed, tiny_models):
    out = precomputed / "decoded_videos"
    report = decode_latents(
        precomputed / pc.LATENTS, out, model_path=tiny_models.checkpoint, with_audio=True, device="cpu"
    )
    assert report.written == {"decode video": 2, "decode audio": 1}
    video = probe_video(out / "clips" / "a.mp4")
    assert (video.frames, video.height, video.width) == (17, 64, 96)
    assert video.fps == pytest.approx(25.0)
    assert (out / "still.png").is_file()
    wav = read_audio(precomputed / pc.DECODED_AUDIO / "clips" / "a.wav")
    assert wav.waveform.shape[0] == 2 and wav.duration > 0.5

    again = decode_latents(precomputed / pc.LATENTS, out, model_path=tiny_models.checkpoint, device="cpu")
    assert again.total_written == 0 and again.skipped == {"decode video": 2}


def test_cli_reports_a_missing_folder_in_one_line(tmp_path, tiny_models):
    result = CliRunner().invoke(
        app, [str(tmp_path / "nope"), str(tmp_path / "out"), "--model-path", str(tiny_models.checkpoint)]
    )
    assert result.exit_code == 2
    assert "latents folder" in result.output and "does not exist" in result.output


def test_latents_decode_back_to_the_input_frames(tmp_path, block_mean_checkpoint, tiny_models):
    """With a VAE that keeps each latent cell's colour, preprocessing then decoding returns the clip:
    the bucket, crop, frame grouping and fps all line up with the source."""
    from ltx_pipelines.io import read_video, write_video

    # Block-constant content: quadrant colours that change between the VAE's frame groups (0, 1-8, 9-16).
    frames = torch.zeros((17, 64, 96, 3), dtype=torch.uint8)
    palette = torch.tensor([[200, 40, 40], [40, 160, 60], [40, 60, 200], [220, 200, 40], [150, 150, 150]])
    for f in range(17):
        group = 0 if f == 0 else (f - 1) // 8 + 1
        for qy in range(2):
            for qx in range(3):
                frames[f, qy * 32 : (qy + 1) * 32, qx * 32 : (qx + 1) * 32] = palette[(group + qy * 3 + qx) % 5]
    root = tmp_path / "d"
    write_video(root / "blocks.mp4", frames, fps=24, crf=0)
    (root / "d.json").write_text(json.dumps([{"video": "blocks.mp4", "caption": "blocks"}]))
    settings = PreprocessSettings(
        model_path=block_mean_checkpoint,
        text_encoder_path=tiny_models.gemma_root,
        resolution_buckets=tuple(parse_buckets("96x64x17")),
        skip_audio=True,
        device="cpu",
    )
    preprocess_dataset(root / "d.json", settings)
    out = root / "decoded"
    decode_latents(root / ".precomputed" / pc.LATENTS, out, model_path=block_mean_checkpoint, device="cpu")
    decoded = read_video(out / "blocks.mp4")
    assert decoded.frames.shape == frames.shape and decoded.fps == pytest.approx(24.0)
    error = (decoded.frames.float() - frames.float()).abs()
    # 8-bit levels (measured: mean 1.8, max 4): two H.264 encodes and the first-order PixelNorm undo.
    assert error.mean() < 3.0 and error.max() < 8


def test_an_empty_folder_and_a_corrupt_file_exit_1_in_one_line(tmp_path, tiny_models):
    empty = tmp_path / "latents"
    empty.mkdir()
    args = [str(empty), str(tmp_path / "out"), "--model-path", str(tiny_models.checkpoint), "--device", "cpu"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "holds no latents files" in result.output
    bad = empty / "clips" / "a.safetensors"
    bad.parent.mkdir()
    bad.write_bytes(bytes(64))  # zeroed, as a crashed copy leaves it
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and str(bad) in lines[-1] and "re-run process_dataset" in lines[-1]
    assert "Traceback" not in result.output
