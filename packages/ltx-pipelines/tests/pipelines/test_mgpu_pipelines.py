"""The `*_mgpu` pipelines with `--num-gpus 2 --device cpu`: two gloo processes write what the
single-process twin writes (on the demo models), a tiled stage 2 stays within its measured blend
tolerance, bad input is refused before any rank starts, and a failing rank is reported. Each `*_mgpu`
module runs its LTX-2.5 demo over 2 ranks (distilled under torchrun, the guided two-stage and HQ ones
spawned), the diffusion decoder's decode included; distilled_mgpu also runs on the LTX-2.3 demo, whose
convolutional decoder spreads its tiles over the ranks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import ltx_pipelines.decode as decode
import ltx_pipelines.distilled_mgpu as distilled_mgpu
from ltx_core.multigpu.launch import computing_as_a_rank
from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise

HEIGHT, WIDTH, FRAMES, SEED = 128, 128, 9, 3
PROMPT = "a heron lands on a frozen pond"
MGPU = ("--num-gpus", "2", "--mgpu-timeout", "600")
"""Two gloo ranks; the timeout only ends a hung run (a loaded 2-core machine takes minutes where an idle one
takes seconds)."""
LTX25_SIZE = 64
LTX25 = ("--demo-family", "ltx-2.5", "--height", str(LTX25_SIZE), "--width", str(LTX25_SIZE))
"""The LTX-2.5 demo runs: 64 x 64 still gives each of 2 ranks a stage-2 tile."""
BLEND_TOLERANCE = 0.02
"""Bound on max |tiled - full-frame| of the stage-2 video latent, relative to the latent's max |value|.
Measured on the demo model, 2 ranks, 1x2 tiles of the 4x4 latent with 2 shared columns: 0.0377 against a
max |value| of 3.64, i.e. 1.04%."""


def _argv(output: Path, *extra: str) -> list[str]:
    return [
        "--demo", "--prompt", PROMPT, "--height", str(HEIGHT), "--width", str(WIDTH),
        "--num-frames", str(FRAMES), "--frame-rate", "24", "--seed", str(SEED), "--device", "cpu", "--dtype", "float32",
        "--log-level", "WARNING", "--save-latents", "--output-path", str(output), *extra,
    ]  # fmt: skip


def _frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)]).astype(np.int16)


@pytest.fixture(scope="module")
def single_process(tiny_models) -> FinalLatents:
    """The LTX-2.3 demo's distilled run (the command lines' settings) in this process, undecoded: the reference
    of the 2-rank runs below (one run shared by them)."""
    from ltx_pipelines import DistilledPipeline

    pipeline = DistilledPipeline(
        tiny_models.checkpoint, tiny_models.spatial_upsampler, tiny_models.gemma_root,
        device="cpu", dtype=torch.float32, progress=False,
    )  # fmt: skip
    from ltx_pipelines.engine.requests import VideoRequest

    video = VideoRequest(height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=24.0)
    return pipeline.generate(PROMPT, seed=SEED, video=video)


@pytest.mark.slow
def test_two_process_run_writes_the_single_process_video(
    demo_cache_home, tiny_models, single_process, monkeypatch, tmp_path
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))  # the spawned ranks inherit it
    parallel = tmp_path / "parallel.mp4"
    # Small decode tiles (3 x 3 spatial tiles) so the distributed decode spreads them over both ranks.
    tiles = ("--tile-size", "64", "--tile-overlap", "32")
    assert distilled_mgpu.main([*MGPU, *_argv(parallel, *tiles)]) == 0
    # Sequence-parallel stages: the final latents agree within 1e-5, the decoder's noise starts where it would.
    got = load_file(str(parallel.with_suffix(".latents.safetensors")))
    for name, want in (("video_latent", single_process.video), ("audio_latent", single_process.audio)):
        assert want is not None and got[name].shape == want.shape
        assert float((got[name] - want).abs().max()) <= 1e-5, name
    assert isinstance(single_process.noise, SeededNoise)
    assert torch.equal(got["decoder_noise_state"], single_process.noise.generator_state())
    # The tile-parallel decode gives exactly the single-process decode of the same latents. (Not the frames of
    # the single run: h264 reacts to the <1e-6 latent differences on the noise-like demo.)
    redecoded = tmp_path / "redecoded.mp4"
    decode_argv = [
        "--latents", str(parallel.with_suffix(".latents.safetensors")), "--output-path", str(redecoded),
        "--checkpoint-path", str(tiny_models.checkpoint), "--device", "cpu", "--dtype", "float32",
        "--log-level", "WARNING", *tiles,
    ]  # fmt: skip
    with computing_as_a_rank(2):  # the ranks' thread count, so the conv reductions add up alike
        assert decode.main(decode_argv) == 0
    frames = _frames(parallel)
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert np.array_equal(frames, _frames(redecoded))
    sidecar = json.loads(parallel.with_suffix(".json").read_text())["parameters"]
    assert (sidecar["num_gpus"], sidecar["stage_2_parallel"]) == (2, "sequence")
    assert "guidance_parallel" not in sidecar  # the distilled stages have no guidance passes to spread
    # Only rank 0 wrote: one clip, its sidecar and its latents.
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("redecoded"))
    assert names == ["parallel.json", "parallel.latents.safetensors", "parallel.mp4"]


def test_bad_num_gpus_is_refused_before_any_rank_starts(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        distilled_mgpu.main(["--num-gpus", "0", *_argv(tmp_path / "out.mp4")])
    assert exit_info.value.code == 2
    assert "--num-gpus must be >= 1, got 0" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_world_size_that_cannot_split_the_heads_is_refused_before_any_rank_starts(
    demo_cache_home, monkeypatch, tmp_path, capsys
):
    """The demo model has 2 heads per stream: 3 ranks cannot split them; exit 2 naming the heads, nothing written."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    with pytest.raises(SystemExit) as exit_info:
        distilled_mgpu.main(["--num-gpus", "3", "--mgpu-timeout", "120", *_argv(tmp_path / "out.mp4")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--num-gpus 3: sequence parallel over 3 ranks needs attention heads divisible by 3" in err
    assert not list(tmp_path.iterdir())


def test_a_rank_failure_exits_non_zero_with_its_error(demo_cache_home, tiny_models, monkeypatch, tmp_path, capsys):
    """A Gemma tokenizer that does not parse passes the checks (they read the weights' headers) and fails when
    rank 0 loads it, while rank 1 waits for the prompt contexts: the controller ends both and reports rank 0's
    error, exit 1. (A weights file cut short is refused before any rank starts: the memory estimate reads its
    header, exit 2.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    gemma = tmp_path / "gemma"
    shutil.copytree(tiny_models.gemma_root, gemma)
    (gemma / "tokenizer.json").write_text("{ not a tokenizer")
    argv = [*MGPU, *_argv(tmp_path / "out.mp4"), "--gemma-root", str(gemma)]
    assert distilled_mgpu.main(argv) == 1
    err = capsys.readouterr().err
    assert "rank 0" in err
    assert not (tmp_path / "out.mp4").exists()

    weights = gemma / "model.safetensors"
    shutil.copy(tiny_models.gemma_root / "model.safetensors", weights)
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size - 1000)
    (gemma / "tokenizer.json").write_bytes((tiny_models.gemma_root / "tokenizer.json").read_bytes())
    with pytest.raises(SystemExit) as refused:
        distilled_mgpu.main(argv)
    assert refused.value.code == 2 and "is truncated" in capsys.readouterr().err


@pytest.mark.slow
def test_tiled_stage_2_stays_within_the_blend_tolerance(demo_cache_home, single_process, monkeypatch, tmp_path, capfd):
    """`--stage-2-parallel tiled` over 2 ranks (1x2 tiles of the 4x4 stage-2 latent, overlap 2): stage 1 is
    sequence parallel, so the shipped (stage-1) audio equals the single process's stage-1 audio; the video
    differs from the full-frame stage 2 by the tiling approximation, measured here on the demo model."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    parallel = tmp_path / "tiled.mp4"
    argv = [*MGPU, *_argv(parallel), "--stage-2-parallel", "tiled"]
    capfd.readouterr()
    assert distilled_mgpu.main([*argv, "--stage-2-tile-overlap", "2", "--log-level", "INFO"]) == 0
    # One prompt: only rank 0 loads Gemma; rank 1 receives the contexts.
    assert capfd.readouterr().err.count("loading Gemma from") == 1
    got = load_file(str(parallel.with_suffix(".latents.safetensors")))
    stage_1_audio = single_process.stage_latents["stage_1.audio_latent"]
    assert float((got["audio_latent"] - stage_1_audio).abs().max()) <= 1e-5
    full_frame = single_process.stage_latents["stage_2.video_latent"]
    error = float((got["video_latent"] - full_frame).abs().max())
    scale = float(full_frame.abs().max())
    assert 1e-5 < error <= BLEND_TOLERANCE * scale, (error, scale)
    sidecar = json.loads(parallel.with_suffix(".json").read_text())["parameters"]
    assert (sidecar["stage_2_parallel"], sidecar["stage_2_tile_overlap"], sidecar["num_gpus"]) == ("tiled", 2, 2)


@pytest.mark.slow
def test_guided_two_stage_mgpu_on_ltx25_matches_single_process_latents(ltx25_demo_home, monkeypatch, tmp_path, capfd):
    """The guided pipeline on the LTX-2.5 demo files over 2 ranks, stage 2 sequence parallel, two ways: its CFG/STG
    batches through the sequence-parallel transformer (the positive and negative prompts encoded on one rank
    each), and with `--guidance-parallel` (stage 1's 4 passes two on each rank, as the ranks log). Both end on the
    single process's final latents, and the sidecar records the modes."""
    import ltx_pipelines.ti2vid_two_stages as two_stages
    import ltx_pipelines.ti2vid_two_stages_mgpu as two_stages_mgpu

    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    single, sequence, passes = tmp_path / "single.mp4", tmp_path / "sequence.mp4", tmp_path / "passes.mp4"
    extra = (*LTX25, "--num-inference-steps", "2")
    assert two_stages.main(_argv(single, *extra)) == 0
    assert two_stages_mgpu.main([*MGPU, *_argv(sequence, *extra), "--stage-2-parallel", "sequence"]) == 0
    argv = [*MGPU, *_argv(passes, *extra), "--stage-2-parallel", "sequence", "--guidance-parallel"]
    capfd.readouterr()
    assert two_stages_mgpu.main([*argv, "--log-level", "INFO"]) == 0
    logged = capfd.readouterr().err
    assert logged.count("guidance parallel: 4 passes per step over 2 group(s) of 1 rank(s)") == 2, logged[-2000:]
    want = load_file(str(single.with_suffix(".latents.safetensors")))
    for out in (sequence, passes):
        got = load_file(str(out.with_suffix(".latents.safetensors")))
        for name in ("video_latent", "audio_latent"):
            assert float((got[name] - want[name]).abs().max()) <= 1e-5, (out.name, name)
    for out, mode in ((sequence, False), (passes, True)):
        sidecar = json.loads(out.with_suffix(".json").read_text())["parameters"]
        recorded = (sidecar["stage_2_parallel"], sidecar["num_gpus"], sidecar["guidance_parallel"])
        assert recorded == ("sequence", 2, mode)
        assert sidecar["demo_family"] == "ltx-2.5"


@pytest.mark.slow
def test_hq_two_stage_mgpu_runs_its_ltx25_demo_with_a_tiled_stage_2(
    ltx25_demo_home, read_output, monkeypatch, tmp_path
):
    """`ti2vid_two_stages_hq_mgpu --demo --demo-family ltx-2.5` over 2 ranks with its default tiled stage 2 (one
    spatial tile per rank): rank 0 decodes through the diffusion decoder and alone writes the clip."""
    import ltx_pipelines.ti2vid_two_stages_hq_mgpu as hq_mgpu

    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    out = tmp_path / "hq.mp4"
    assert hq_mgpu.main([*MGPU, *_argv(out, *LTX25, "--num-inference-steps", "2")]) == 0
    written = read_output(out)
    assert written.frames.shape == (FRAMES, LTX25_SIZE, LTX25_SIZE, 3)
    sidecar = written.sidecar["parameters"]
    assert (sidecar["stage_2_parallel"], sidecar["num_gpus"], sidecar["model_version"]) == ("tiled", 2, "2.5.1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hq.json", "hq.latents.safetensors", "hq.mp4"]


@pytest.mark.slow
def test_torchrun_runs_the_ltx25_demo_and_rank_0_decodes_what_one_process_decodes(ltx25_demo_home, tmp_path):
    """`torchrun --nproc_per_node 2 -m ltx_pipelines.distilled_mgpu --demo --demo-family ltx-2.5` (no --num-gpus): the
    module joins torchrun's group (gloo), rank 0 alone writes, the sidecar records torchrun's world size. The
    clip was decoded under the 2-rank group by the LTX-2.5 diffusion decoder: rank 0 got the frames (a rank
    that gets any fails the run), the very frames one process decodes from the same latents."""
    from ltx_core.multigpu.launch import find_free_port

    out = tmp_path / "torchrun.mp4"
    env = {**os.environ, "XDG_CACHE_HOME": str(ltx25_demo_home), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
        "--master_addr", "127.0.0.1", "--master_port", str(find_free_port()),
        "-m", "ltx_pipelines.distilled_mgpu", *_argv(out, *LTX25), "--mgpu-timeout", MGPU[-1],
    ]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "torchrun.json", "torchrun.latents.safetensors", "torchrun.mp4"
    ]  # fmt: skip
    sidecar = json.loads(out.with_suffix(".json").read_text())["parameters"]
    assert (sidecar["num_gpus"], sidecar["model_version"]) == (2, "2.5.1")
    redecoded = tmp_path / "redecoded" / "one-process.mp4"
    decode_argv = [
        "--latents", str(out.with_suffix(".latents.safetensors")), "--output-path", str(redecoded), "--device", "cpu",
        "--log-level", "WARNING",
    ]  # fmt: skip
    assert decode.main(decode_argv) == 0
    frames = _frames(out)
    assert frames.shape == (FRAMES, LTX25_SIZE, LTX25_SIZE, 3)
    assert np.array_equal(frames, _frames(redecoded))


def test_num_gpus_other_than_torchruns_world_size_is_refused(monkeypatch):
    import argparse

    from ltx_pipelines.cli.flag_group import FlagError, ReadContext, add_groups
    from ltx_pipelines.cli.multigpu import MultiGpuFlags
    from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS

    def num_gpus(argv: list[str]) -> int:
        parser = argparse.ArgumentParser()
        add_groups(parser, (MultiGpuFlags(),), LTX_2_3_DEFAULTS)
        return MultiGpuFlags().read(parser.parse_args(argv), ReadContext(LTX_2_3_DEFAULTS, demo=False)).value.num_gpus

    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    assert num_gpus([]) == 2
    with pytest.raises(FlagError, match=r"--num-gpus 3 but torchrun started 2 processes \(WORLD_SIZE\)"):
        num_gpus(["--num-gpus", "3"])


@pytest.mark.parametrize(
    ("num_gpus", "height", "width", "fits"),
    [(2, 64, 64, True), (4, 64, 64, True), (6, 64, 64, False), (8, 64, 128, True), (8, 64, 64, False)],
)
def test_a_tiled_stage_2_needs_a_tile_per_rank(num_gpus, height, width, fits):
    """Checked when the command line is parsed: 6 ranks cannot share the 2x2 latent of a 64x64 output."""
    from ltx_pipelines.cli.multigpu import tiled_stage_2_problem

    problem = tiled_stage_2_problem(num_gpus, height, width, overlap=5)
    assert (problem is None) == fits
    if not fits:
        assert f"fewer than --num-gpus {num_gpus}; use --stage-2-parallel sequence" in problem
