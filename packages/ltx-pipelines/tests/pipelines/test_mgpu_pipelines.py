"""The `*_mgpu` pipelines with `--num-gpus 2 --device cpu`: two gloo processes write what the
single-process twin writes (on the demo models), refuse bad input, and report a failing rank."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import ltx_pipelines.decode as decode
import ltx_pipelines.distilled as distilled
import ltx_pipelines.distilled_mgpu as distilled_mgpu

HEIGHT, WIDTH, FRAMES, SEED = 128, 128, 9, 3


def _argv(output: Path, *extra: str) -> list[str]:
    return [
        "--demo", "--prompt", "a heron lands on a frozen pond", "--height", str(HEIGHT), "--width", str(WIDTH),
        "--num-frames", str(FRAMES), "--seed", str(SEED), "--device", "cpu", "--dtype", "float32",
        "--log-level", "WARNING", "--save-latents", "--output-path", str(output), *extra,
    ]  # fmt: skip


def _frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)]).astype(np.int16)


@pytest.mark.slow
def test_two_process_run_writes_the_single_process_video(demo_cache_home, tiny_models, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))  # the spawned ranks inherit it
    single, parallel = tmp_path / "single.mp4", tmp_path / "parallel.mp4"
    # Small decode tiles (3 x 3 spatial tiles) so the distributed decode spreads them over both ranks.
    tiles = ("--tile-size", "64", "--tile-overlap", "32")
    assert distilled.main(_argv(single, *tiles)) == 0
    assert distilled_mgpu.main(["--num-gpus", "2", "--mgpu-timeout", "120", *_argv(parallel, *tiles)]) == 0
    # Sequence-parallel stages: the final latents agree within 1e-5.
    want = load_file(str(single.with_suffix(".latents.safetensors")))
    got = load_file(str(parallel.with_suffix(".latents.safetensors")))
    for name in ("video_latent", "audio_latent"):
        assert got[name].shape == want[name].shape
        assert float((got[name] - want[name]).abs().max()) <= 1e-5, name
    assert torch.equal(got["decoder_noise_state"], want["decoder_noise_state"])
    # The tile-parallel decode gives exactly the single-process decode of the same latents. (The two
    # runs' mp4s differ slightly: h264 reacts to the <1e-6 latent differences on the noise-like demo.)
    redecoded = tmp_path / "redecoded.mp4"
    decode_argv = [
        "--latents", str(parallel.with_suffix(".latents.safetensors")), "--output-path", str(redecoded),
        "--checkpoint-path", str(tiny_models.checkpoint), "--device", "cpu", "--dtype", "float32",
        "--log-level", "WARNING", *tiles,
    ]  # fmt: skip
    assert decode.main(decode_argv) == 0
    frames = _frames(parallel)
    assert frames.shape == _frames(single).shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert np.array_equal(frames, _frames(redecoded))
    # Only rank 0 wrote: exactly the single run's set of files.
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("redecoded"))
    assert names == sorted(["single.mp4", "single.json", "single.latents.safetensors",
                            "parallel.mp4", "parallel.json", "parallel.latents.safetensors"])  # fmt: skip


def test_bad_num_gpus_is_refused_before_any_rank_starts(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        distilled_mgpu.main(["--num-gpus", "0", *_argv(tmp_path / "out.mp4")])
    assert exit_info.value.code == 2
    assert "--num-gpus must be >= 1, got 0" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_rank_failure_exits_non_zero_with_its_error(demo_cache_home, monkeypatch, tmp_path, capsys):
    """A run whose ranks cannot split the transformer heads (the demo model has 2) fails on every
    rank; the controller reports that error and exits 1, writing nothing."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    code = distilled_mgpu.main(["--num-gpus", "3", "--mgpu-timeout", "120", *_argv(tmp_path / "out.mp4")])
    assert code == 1
    assert "heads divisible by 3" in capsys.readouterr().err
    assert not (tmp_path / "out.mp4").exists()


@pytest.mark.slow
def test_guided_two_stage_mgpu_matches_single_process_latents(demo_cache_home, monkeypatch, tmp_path):
    """The guided pipeline (CFG/STG batches through the sequence-parallel transformer) over 2 ranks."""
    import ltx_pipelines.ti2vid_two_stages as two_stages
    import ltx_pipelines.ti2vid_two_stages_mgpu as two_stages_mgpu

    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    single, parallel = tmp_path / "single.mp4", tmp_path / "parallel.mp4"
    steps = ("--num-inference-steps", "2")
    assert two_stages.main(_argv(single, *steps)) == 0
    assert two_stages_mgpu.main(["--num-gpus", "2", "--mgpu-timeout", "120", *_argv(parallel, *steps)]) == 0
    want = load_file(str(single.with_suffix(".latents.safetensors")))
    got = load_file(str(parallel.with_suffix(".latents.safetensors")))
    for name in ("video_latent", "audio_latent"):
        assert float((got[name] - want[name]).abs().max()) <= 1e-5, name
