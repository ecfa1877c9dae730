"""Buckets, masks on the latent grid, caption clean-up, audio channel handling, dataset files, sample files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ltx_trainer.preprocessing import precomputed as pc
from ltx_trainer.preprocessing.buckets import (
    Bucket,
    BucketError,
    choose_bucket,
    parse_buckets,
    parse_durations,
    reference_bucket,
)
from ltx_trainer.preprocessing.caption_features import prepare_caption, remove_llm_prefixes
from ltx_trainer.preprocessing.dataset_file import DatasetFileError, read_dataset, relative_media_key, resolve_roles
from ltx_trainer.preprocessing.masks import pool_audio_mask, pool_video_mask
from ltx_trainer.preprocessing.media import plan_crop, read_stereo_audio
from ltx_trainer.preprocessing.sharding import Shard


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("768x448", "does not parse"),
        ("768x448x89;abc", "'abc' does not parse"),
        ("770x448x89", "width 770 must be a positive multiple of 32"),
        ("768x448x88", "frames 88 must be 8k\\+1"),
        (" ; ", "no resolution buckets"),
    ],
)
def test_bucket_strings_that_do_not_parse_name_the_entry(spec, message):
    with pytest.raises(BucketError, match=message):
        parse_buckets(spec)


def test_bucket_choice_prefers_aspect_then_frames_then_area():
    buckets = parse_buckets("512x512x49;768x448x49;768x448x25;384x224x49;512x512x1")
    assert choose_bucket(buckets, 1920, 1080, 100) == Bucket(768, 448, 49)  # closest to 16:9, most frames, largest
    assert choose_bucket(buckets, 1920, 1080, 30) == Bucket(768, 448, 25)  # not long enough for 49 frames
    assert choose_bucket(buckets, 1000, 1000, 60) == Bucket(512, 512, 49)
    assert choose_bucket(buckets, 1000, 1000, 1, is_image=True) == Bucket(512, 512, 1)
    assert choose_bucket(buckets, 1920, 1080, 20) is None  # a short video is not turned into a still
    assert choose_bucket(parse_buckets("512x512x49"), 64, 64, 1, is_image=True) is None


def test_reference_buckets_and_durations():
    assert reference_bucket(Bucket(768, 448, 49), 2, 2) == Bucket(384, 224, 25)
    assert reference_bucket(Bucket(768, 448, 49), 1, 3) == Bucket(768, 448, 17)
    with pytest.raises(BucketError, match="does not fit the VAE"):
        reference_bucket(Bucket(96, 64, 9), 2, 1)  # 48 x 32 pixels: 48 is not a multiple of 32
    with pytest.raises(BucketError, match="not divisible"):
        reference_bucket(Bucket(96, 64, 9), 1, 3)
    with pytest.raises(BucketError, match="cannot be divided"):
        reference_bucket(Bucket(96, 64, 9), 5, 1)
    assert parse_durations("4;2;8s") == [2.0, 4.0, 8.0]
    with pytest.raises(BucketError, match="must be positive"):
        parse_durations("2;-1")


def test_video_mask_groups_frames_like_the_vae():
    mask = torch.zeros(17, 64, 64)
    mask[8, :32, :32] = 1.0  # frame 8 belongs to latent frame 1 (frames 1..8)
    mask[9, 32:, 32:] = 1.0  # frame 9 belongs to latent frame 2 (frames 9..16)
    pooled = pool_video_mask(mask)
    assert pooled.shape == (3, 2, 2)
    assert pooled[0].sum() == 0
    assert pooled[1].tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert pooled[2].tolist() == [[0.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match="does not fit the VAE grid"):
        pool_video_mask(torch.zeros(16, 64, 64))
    assert pool_audio_mask(torch.tensor([0.0, 0.0, 1.0, 0.0]), 2).tolist() == [0.0, 1.0]


def test_caption_clean_up_and_trigger():
    assert remove_llm_prefixes("This video shows a cat on a sofa.") == "A cat on a sofa."
    assert remove_llm_prefixes("Caption: In the video, rain falls") == "Rain falls"
    assert remove_llm_prefixes("A dog runs.") == "A dog runs."
    assert prepare_caption("The video shows a dog.", lora_trigger="sks", strip_prefixes=True) == "sks A dog."
    assert (
        prepare_caption("The video shows a dog.", lora_trigger=None, strip_prefixes=False) == "The video shows a dog."
    )


def test_audio_is_stereo_mono_duplicated_and_surround_downmixed(tmp_path, make_wav, make_surround):
    mono = read_stereo_audio(make_wav(tmp_path / "m.wav", seconds=0.5))
    assert mono.waveform.shape[0] == 2 and torch.equal(mono.waveform[0], mono.waveform[1])
    assert mono.fitted(0.75).waveform.shape[1] == 12000 and mono.fitted(0.75).waveform[:, 8000:].abs().max() == 0
    surround = read_stereo_audio(make_surround(tmp_path / "s.mp4"))
    left, right = surround.waveform.abs().amax(dim=1)
    assert surround.waveform.shape[0] == 2 and left > 0.2 and right < 0.05 * left  # front-left stays left


def test_dataset_files_and_names(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"video": "a.mp4", "caption": "x"}\n{oops\n')
    with pytest.raises(DatasetFileError, match="line 2 is not valid JSON"):
        read_dataset(tmp_path / "d.jsonl")
    (tmp_path / "d.csv").write_text("media_path,caption\nclips/a.mp4,hello\n")
    dataset = read_dataset(tmp_path / "d.csv")
    assert resolve_roles(dataset.columns) == {"video": "media_path", "caption": "caption"}
    assert relative_media_key(dataset, "clips/a.mp4") == Path("clips/a.mp4")
    outside = relative_media_key(dataset, "/elsewhere/b.mp4")
    assert not outside.is_absolute() and outside.parts[-1] == "b.mp4"
    # A staged symlink keeps the row's own name, not the name of the file it points to.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "source.mp4").write_bytes(b"x")
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "a.mp4").symlink_to(tmp_path / "elsewhere" / "source.mp4")
    assert relative_media_key(dataset, "clips/a.mp4") == Path("clips/a.mp4")
    assert relative_media_key(dataset, "clips/../clips/a.mp4") == Path("clips/a.mp4")
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(DatasetFileError, match="must end in one of"):
        read_dataset(tmp_path / "d.txt")


def test_sample_files_round_trip_and_reference_pt_layout(tmp_path):
    path = pc.save_sample(tmp_path / "s.safetensors", pc.video_latent_tensors(torch.ones(128, 2, 3, 4), 24.0), {"a": 1})
    sample = pc.load_sample(path)
    assert int(sample.tensors["num_frames"]) == 2 and sample.meta_json("a") == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    legacy = tmp_path / "old.pt"
    torch.save({"latents": torch.zeros(128, 1, 2, 2), "num_frames": 1, "height": 2, "width": 2, "fps": 24}, legacy)
    old = pc.load_sample(legacy)
    assert old.tensors["latents"].shape == (128, 1, 2, 2) and float(old.tensors["fps"]) == 24.0
    assert pc.find_samples(tmp_path) == [legacy, path]


def test_random_crop_is_reproducible_and_shards_are_disjoint():
    a = plan_crop(100, 300, 64, 64, "random", torch.Generator().manual_seed(1))
    b = plan_crop(100, 300, 64, 64, "random", torch.Generator().manual_seed(1))
    assert a == b and a.scaled_height == 64 and 0 <= a.left <= a.scaled_width - 64
    assert plan_crop(100, 300, 64, 64).left == (a.scaled_width - 64) // 2
    items = list(range(7))
    assert Shard(0, 2).take(items) + Shard(1, 2).take(items) == [0, 2, 4, 6, 1, 3, 5]
    assert json.dumps(pc.read_manifest(Path("/nonexistent"))) == "null"


def test_reference_crop_sits_where_the_target_crop_sits():
    from ltx_trainer.preprocessing.media import crop_like

    target = plan_crop(100, 400, 64, 128, "random", torch.Generator().manual_seed(3))
    ref = crop_like(target, 64, 128, 50, 200, 32, 64)  # half-size reference of the same scene
    assert (ref.scaled_height, ref.scaled_width) == (32, 128)
    assert ref.left / (ref.scaled_width - 64) == pytest.approx(target.left / (target.scaled_width - 128), abs=0.02)


def test_each_rank_takes_its_own_gpu(monkeypatch):
    from ltx_trainer.preprocessing.sharding import shard_device

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert shard_device("cuda") == "cuda" and shard_device(None) is None
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert shard_device("cuda") == "cuda:3" and shard_device("cuda:1") == "cuda:1" and shard_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert shard_device(None) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert shard_device(None) == "cuda:3"


def test_a_batch_larger_than_the_dataset_is_refused_naming_the_field():
    """Why the skill skips autotune's batch-doubling trial on its one-sample sanity set (issue 22 item 16):
    the trainer refuses a batch the data cannot fill instead of running a degenerate one."""
    from ltx_trainer.training.data import BatchOrder

    with pytest.raises(ValueError, match=r"1 samples, fewer than one global batch \(2 x 1 processes\).*batch_size"):
        BatchOrder(num_samples=1, batch_size=2, seed=0)
    assert BatchOrder(num_samples=2, batch_size=2, seed=0).batches_per_epoch == 1
