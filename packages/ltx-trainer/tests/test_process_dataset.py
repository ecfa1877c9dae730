"""process_dataset end to end on synthetic media with the tiny checkpoint and Gemma folder."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
import torch

from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.buckets import BucketError, parse_buckets
from ltx_trainer.preprocessing.dataset_file import DatasetFileError
from ltx_trainer.preprocessing.plan import PreprocessSettings
from ltx_trainer.preprocessing.run import preprocess_dataset

BUCKETS = "96x64x17;64x96x9;64x64x1"


@pytest.fixture
def mixed_dataset(tmp_path, make_clip, make_image, make_wav) -> Path:
    """Landscape and portrait clips of different lengths, an image, an audio-only file, a clip too
    short for every video bucket and a file that is not media."""
    root = tmp_path / "data"
    make_clip(root / "videos" / "wide.mp4", frames=19, height=64, width=96, fps=24)
    make_clip(root / "videos" / "tall.mp4", frames=11, height=96, width=64, fps=30, hz=550)
    make_clip(root / "videos" / "short.mp4", frames=5, height=64, width=64)
    make_image(root / "images" / "still.png", height=70, width=70)
    make_wav(root / "sounds" / "tone.wav", seconds=1.3)
    (root / "videos" / "broken.mp4").write_bytes(b"this is not a video file" * 10)
    rows = [
        {"video": "videos/wide.mp4", "caption": "A white square slides over red."},
        {"video": "videos/tall.mp4", "caption": "This video shows a square on red."},
        {"video": "videos/short.mp4", "caption": "Too short."},
        {"video": "images/still.png", "caption": "A still frame."},
        {"audio": "sounds/tone.wav", "caption": "A steady tone."},
        {"video": "videos/broken.mp4", "caption": "Broken."},
    ]
    path = root / "dataset.json"
    path.write_text(json.dumps(rows))
    return path


def _settings(models, **overrides) -> PreprocessSettings:
    values = {
        "model_path": models.checkpoint,
        "text_encoder_path": models.gemma_root,
        "resolution_buckets": tuple(parse_buckets(BUCKETS)),
        "audio_durations": (0.5, 1.0),
        "device": "cpu",
    }
    values.update(overrides)
    return PreprocessSettings(**values)


def _tree(root: Path) -> dict[str, dict[str, torch.Tensor]]:
    return {str(p.relative_to(root)): pc.load_sample(p).tensors for p in pc.find_samples(root)}


def test_mixed_folder_writes_expected_files_and_reports_two_drops(mixed_dataset, tiny_models, caplog):
    report = preprocess_dataset(mixed_dataset, _settings(tiny_models))
    out = mixed_dataset.parent / ".precomputed"
    tree = _tree(out)

    # Video latents: 128 channels on the bucket's latent grid; the image is a 1-frame sample at 1 fps.
    assert tree["latents/videos/wide.safetensors"]["latents"].shape == (128, 3, 2, 3)  # 96x64x17
    assert tree["latents/videos/tall.safetensors"]["latents"].shape == (128, 2, 3, 2)  # 64x96x9
    assert tree["latents/images/still.safetensors"]["latents"].shape == (128, 1, 2, 2)  # 64x64x1
    assert float(tree["latents/videos/tall.safetensors"]["fps"]) == pytest.approx(30.0)
    assert float(tree["latents/images/still.safetensors"]["fps"]) == 1.0
    wide = tree["latents/videos/wide.safetensors"]
    assert [int(wide[k]) for k in ("num_frames", "height", "width")] == [3, 2, 3]

    # Audio: the clips' own tracks cut to their encoded span (frames / the clip's fps); the audio-only
    # file to the longest duration bucket it covers (1.3 s -> 1.0 s).
    wide_audio = tree["audio_latents/videos/wide.safetensors"]
    assert float(wide_audio["duration"]) == pytest.approx(17 / 24, abs=1e-6)
    assert wide_audio["latents"].shape[0] == 8 and wide_audio["latents"].shape[2] == 16
    assert float(tree["audio_latents/videos/tall.safetensors"]["duration"]) == pytest.approx(9 / 30, abs=1e-6)
    tone = tree["audio_latents/sounds/tone.safetensors"]
    assert float(tone["duration"]) == 1.0 and int(tone["num_time_steps"]) == tone["latents"].shape[1]
    assert "audio_latents/images/still.safetensors" not in tree

    # Conditions: per-sample features before the connectors, named after each row's media.
    cond = tree["conditions/videos/wide.safetensors"]
    assert cond["video_prompt_embeds"].ndim == 2 and cond["prompt_attention_mask"].dtype == torch.bool
    assert cond["video_prompt_embeds"].shape[0] == cond["prompt_attention_mask"].shape[0]
    assert "audio_prompt_embeds" in cond
    assert "conditions/sounds/tone.safetensors" in tree

    dropped = {d.path: d.reason for d in report.drops}
    assert set(dropped) == {"videos/short.mp4", "videos/broken.mp4"}
    assert "too short" in dropped["videos/short.mp4"] and "5 frames" in dropped["videos/short.mp4"]
    assert "unreadable" in dropped["videos/broken.mp4"]
    assert "videos/short.mp4" in report.render() and "too short" in report.render()
    assert pc.read_manifest(out)["resolution_buckets"] == BUCKETS.split(";")

    # A second run finds everything in place: it writes nothing and leaves every file untouched.
    stamps = {p: p.stat().st_mtime_ns for p in pc.find_samples(out)}
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = preprocess_dataset(mixed_dataset, _settings(tiny_models))
    assert not [r for r in caplog.records if "built" in r.getMessage() or "other settings" in r.getMessage()]
    assert again.total_written == 0
    assert {p: p.stat().st_mtime_ns for p in pc.find_samples(out)} == stamps


def test_interrupted_run_resumes_to_the_same_result(mixed_dataset, tiny_models, tmp_path, monkeypatch):
    clean = preprocess_dataset(mixed_dataset, _settings(tiny_models, output_dir=tmp_path / "clean"))
    assert clean.total_written > 0

    # Kill the run in the middle of writing its fourth file: the write was started, not finished.
    import safetensors.torch

    real_save = safetensors.torch.save_file
    calls = {"n": 0}

    def dying_save(tensors, filename, metadata=None):
        calls["n"] += 1
        if calls["n"] == 4:
            Path(filename).write_bytes(b"half a file")
            raise KeyboardInterrupt
        return real_save(tensors, filename, metadata=metadata)

    monkeypatch.setattr(pc, "save_file", dying_save)
    resumed_dir = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        preprocess_dataset(mixed_dataset, _settings(tiny_models, output_dir=resumed_dir))
    assert len(pc.find_samples(resumed_dir)) == 3  # nothing half-written is visible
    monkeypatch.setattr(pc, "save_file", real_save)

    resumed = preprocess_dataset(mixed_dataset, _settings(tiny_models, output_dir=resumed_dir))
    assert resumed.total_written == clean.total_written - 3
    a, b = _tree(tmp_path / "clean"), _tree(resumed_dir)
    assert sorted(a) == sorted(b)
    for name in a:
        for key, value in a[name].items():
            assert torch.equal(value, b[name][key]), (name, key)


def test_references_masks_and_scale_factors(tmp_path, make_clip, tiny_models):
    root = tmp_path / "ic"
    make_clip(root / "target.mp4", frames=17, height=64, width=128)
    make_clip(root / "canny.mp4", frames=17, height=64, width=128, hz=660)
    # The mask covers the right half of every frame (white = keep as conditioning).
    from ltx_pipelines.io import write_video

    mask = torch.zeros((17, 64, 128, 3), dtype=torch.uint8)
    mask[:, :, 64:] = 255
    write_video(root / "mask.mp4", mask, fps=24, crf=0)
    rows = [{"video": "target.mp4", "reference_video": "canny.mp4", "video_mask": "mask.mp4", "caption": "c"}]
    (root / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    settings = _settings(
        tiny_models,
        resolution_buckets=tuple(parse_buckets("128x64x17")),
        reference_downscale_factor=2,
        reference_temporal_scale_factor=2,
        skip_audio=True,
    )
    report = preprocess_dataset(root / "d.jsonl", settings)
    assert not report.drops
    out = root / ".precomputed"
    ref = pc.load_sample(out / "reference_latents" / "target.safetensors")
    # 64x32 pixels, frames 0, 2, ..., 16 (9 frames) -> latent grid (2, 1, 2); fps halved.
    assert ref.tensors["latents"].shape == (128, 2, 1, 2)
    assert float(ref.tensors["fps"]) == pytest.approx(12.0)
    assert ref.meta_json("reference_downscale_factor") == 2
    assert ref.meta_json("reference_temporal_scale_factor") == 2
    manifest = pc.read_manifest(out)
    assert manifest["reference_downscale_factor"] == 2 and manifest["reference_temporal_scale_factor"] == 2

    video_mask = pc.load_sample(out / "video_masks" / "target.safetensors").tensors["mask"]
    assert video_mask.shape == (3, 2, 4)
    assert torch.all(video_mask[:, :, 2:] > 0.5) and torch.all(video_mask[:, :, :2] < 0.5)
    assert not (out / "audio_latents").exists()


@pytest.mark.parametrize(
    ("rows", "overrides", "error", "message"),
    [
        ([{"video": "a.mp4"}], {}, DatasetFileError, "no caption column"),
        ([{"caption": "x"}], {}, DatasetFileError, "no media column"),
        ([{"video": "a.mp4", "caption": "x"}], {"resolution_buckets": ()}, BucketError, "--resolution-buckets"),
        ([{"audio": "a.wav", "caption": "x"}], {"audio_durations": ()}, BucketError, "--audio-durations"),
        ([{"video": "a.mp4", "caption": "x"}], {"video_column": "clip"}, DatasetFileError, "'clip'"),
        (
            [{"video": "a.mp4", "reference_video": "b.mp4", "caption": "x"}],
            {"reference_temporal_scale_factor": 3, "resolution_buckets": tuple(parse_buckets("64x64x17"))},
            BucketError,
            "not divisible",
        ),
        (
            [{"video": "a.mp4", "reference_video": "b.mp4", "caption": "x"}],
            {"reference_downscale_factor": 2},
            BucketError,
            "single resolution bucket",
        ),
    ],
)
def test_bad_input_fails_before_any_work(tmp_path, tiny_models, rows, overrides, error, message):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(error, match=message):
        preprocess_dataset(path, _settings(tiny_models, **overrides))
    assert not (tmp_path / ".precomputed").exists()


def test_shards_split_rows_between_ranks(mixed_dataset, tiny_models, monkeypatch, tmp_path):
    outputs = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        out = tmp_path / f"rank{rank}"
        preprocess_dataset(mixed_dataset, _settings(tiny_models, output_dir=out, skip_audio=True))
        outputs.append({str(p.relative_to(out)) for p in pc.find_samples(out / "conditions")})
    assert outputs[0] and outputs[1] and not outputs[0] & outputs[1]
    assert len(outputs[0] | outputs[1]) == 6
    assert os.environ["WORLD_SIZE"] == "2"


def test_audio_only_rows_with_reference_audio_and_masks(tmp_path, make_wav, tiny_models):
    from safetensors.torch import save_file

    root = tmp_path / "a"
    make_wav(root / "song.wav", seconds=2.3)
    make_wav(root / "ref.wav", seconds=3.0, hz=220)
    make_wav(root / "tiny.wav", seconds=0.3)
    # Mask the second half of the song's 2 s window.
    save_file({"mask": torch.cat([torch.zeros(50), torch.ones(50)])}, str(root / "song_mask.safetensors"))
    rows = [
        {"audio": "song.wav", "reference_audio": "ref.wav", "audio_mask": "song_mask.safetensors", "caption": "x"},
        {"audio": "tiny.wav", "caption": "too short"},
    ]
    (root / "d.json").write_text(json.dumps(rows))
    report = preprocess_dataset(
        root / "d.json", _settings(tiny_models, resolution_buckets=(), audio_durations=(1.0, 2.0))
    )
    out = root / ".precomputed"
    song = pc.load_sample(out / "audio_latents" / "song.safetensors").tensors
    ref = pc.load_sample(out / "reference_audio_latents" / "song.safetensors").tensors
    assert float(song["duration"]) == 2.0 and float(ref["duration"]) == 2.0
    mask = pc.load_sample(out / "audio_masks" / "song.safetensors").tensors["mask"]
    steps = song["latents"].shape[1]
    assert mask.shape == (steps,) and mask[: steps // 2 - 1].max() == 0 and mask[steps // 2 + 1 :].min() == 1
    assert [(d.path, d.stage) for d in report.drops] == [("tiny.wav", "audio")]
    assert "too short: 0.30 s" in report.drops[0].reason


def test_a_mask_that_does_not_match_its_clip_is_dropped_with_the_expected_size(tmp_path, make_clip, tiny_models):
    root = tmp_path / "m"
    make_clip(root / "clip.mp4", frames=9, height=64, width=64)
    make_clip(root / "mask.mp4", frames=9, height=64, width=96)
    rows = [{"video": "clip.mp4", "video_mask": "mask.mp4", "caption": "x"}]
    (root / "d.json").write_text(json.dumps(rows))
    settings = _settings(tiny_models, resolution_buckets=tuple(parse_buckets("64x64x9")), skip_audio=True, decode=True)
    report = preprocess_dataset(root / "d.json", settings)
    assert [(d.path, d.stage) for d in report.drops] == [("mask.mp4", "video mask")]
    assert "mask is 96x64 but its clip is 64x64" in report.drops[0].reason
    assert (root / ".precomputed" / "decoded_videos" / "clip.mp4").is_file()  # --decode previews


@pytest.mark.slow  # a second Python process (importing torch takes seconds on a busy machine)
def test_a_killed_process_leaves_no_partial_sample_and_the_rerun_finishes(tmp_path, make_clip, tiny_models):
    import signal
    import subprocess
    import sys
    import time

    from ltx_trainer.process_videos import process_videos

    root = tmp_path / "k"
    rows = []
    for i in range(6):
        make_clip(root / f"c{i}.mp4", frames=17, height=64, width=96, hz=300 + 50 * i)
        rows.append({"video": f"c{i}.mp4", "caption": f"clip {i}"})
    (root / "d.json").write_text(json.dumps(rows))
    latents = root / ".precomputed" / "latents"
    options = {"resolution_buckets": "96x64x17", "model_path": tiny_models.checkpoint, "device": "cpu"}
    args = ["--resolution-buckets", "96x64x17", "--output-dir", str(latents)]
    args += ["--model-path", str(tiny_models.checkpoint), "--device", "cpu", "--with-audio"]
    process = subprocess.Popen(
        [sys.executable, "-m", "ltx_trainer.process_videos", str(root / "d.json"), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    try:
        while not pc.find_samples(latents) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.005)
        assert process.poll() is None, "the run finished before it could be killed"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    done = len(pc.find_samples(latents))
    assert 1 <= done < 6
    for path in pc.find_samples(root / ".precomputed"):
        pc.load_sample(path)  # every visible file is complete

    report = process_videos(root / "d.json", output_dir=latents, with_audio=True, **options)
    assert report.written["video"] == 6 - done and not report.drops
    clean = tmp_path / "clean"
    process_videos(root / "d.json", output_dir=clean / "latents", with_audio=True, **options)
    a, b = _tree(clean), _tree(root / ".precomputed")
    assert sorted(a) == sorted(b) and len(a) == 12
    for name in a:
        for key, value in a[name].items():
            assert torch.allclose(value.float(), b[name][key].float(), atol=1e-5), (name, key)


def test_every_sample_dropped_exits_1_with_the_reason(tmp_path, make_clip, tiny_models):
    from typer.testing import CliRunner

    from ltx_trainer.process_dataset import app

    make_clip(tmp_path / "a.mp4", frames=9)
    make_clip(tmp_path / "b.mp4", frames=9)
    (tmp_path / "d.json").write_text(json.dumps([{"video": n, "caption": "x"} for n in ("a.mp4", "b.mp4")]))
    args = [
        str(tmp_path / "d.json"), "--model-path", str(tiny_models.checkpoint), "--text-encoder-path",
        str(tiny_models.gemma_root), "--device", "cpu", "--skip-audio",
    ]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--resolution-buckets", "64x64x17"])  # every clip is 9 frames long
    assert result.exit_code == 1, result.output
    assert "error: every sample failed or was dropped (2 of 2), nothing usable written (first: a.mp4:" in result.output
    result = CliRunner().invoke(app, [*args, "--resolution-buckets", "64x64x9"])
    assert result.exit_code == 0, result.output
