"""`--guidance-parallel` on the `*_mgpu` commands: refused (exit 2, nothing written, before any rank starts) where
it cannot work, and over 2 gloo ranks the one-stage run ends on the single process's latents (the two-stage run:
`test_mgpu_pipelines.py`)."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

import ltx_pipelines.distilled_mgpu as distilled_mgpu
import ltx_pipelines.ti2vid_two_stages_mgpu as two_stages_mgpu

from .test_mgpu_pipelines import MGPU, _argv


def test_multi_device_hands_guided_stages_the_guidance_parallel_transformer():
    """One process: the wrapper the guided stage recognises, whose direct call (an unguided stage) is the model's."""
    import torch

    from ltx_core.multigpu import GuidanceParallelTransformer, SequenceParallelTransformer
    from ltx_pipelines.engine.multigpu import MultiDevice

    class Doubling(torch.nn.Module):  # the transformer's call signature
        def forward(self, video, audio, perturbations=None):
            return video * 2, None if perturbations is None else audio

    model = Doubling()
    wrapped = MultiDevice(guidance_parallel=True).stage_transformer(model)
    assert isinstance(wrapped, GuidanceParallelTransformer) and wrapped.model is model
    assert isinstance(MultiDevice().stage_transformer(model), SequenceParallelTransformer)
    video, audio = torch.arange(3.0), torch.ones(2)
    got = wrapped(video, audio, "perturbed")
    assert torch.equal(got[0], video * 2) and got[1] is audio


def _refused(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_distilled_command_refuses_guidance_parallel(tmp_path, capsys):
    err = _refused(distilled_mgpu.main, [*MGPU, "--guidance-parallel", *_argv(tmp_path / "out.mp4")], capsys)
    assert "--guidance-parallel is not accepted by this command: it has no guided stage" in err
    assert not list(tmp_path.iterdir())


def test_guidance_parallel_needs_two_gpus(tmp_path, capsys):
    argv = ["--num-gpus", "1", "--guidance-parallel", *_argv(tmp_path / "out.mp4")]
    err = _refused(two_stages_mgpu.main, argv, capsys)
    assert "--guidance-parallel needs --num-gpus >= 2 (one pass group per GPU), got 1" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--step-cache", "0.2"), "--guidance-parallel does not combine with --step-cache"),
        # 9 ranks, 4 passes: 3 groups of 3 ranks, which cannot split the demo model's 2 heads per stream.
        (("--num-gpus", "9"), "--num-gpus 9 --guidance-parallel: 4 passes per step leave groups of 3 ranks"),
    ],
    ids=["step-cache", "group-heads"],
)
def test_guidance_parallel_run_checks_before_any_rank_starts(
    demo_cache_home, monkeypatch, tmp_path, capsys, extra, message
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    argv = [*MGPU, "--guidance-parallel", *_argv(tmp_path / "out.mp4"), *extra]
    err = _refused(two_stages_mgpu.main, argv, capsys)
    assert message in err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_one_stage_with_guidance_parallel_matches_single_process_latents(demo_cache_home, monkeypatch, tmp_path, capfd):
    """`ti2vid_one_stage_mgpu --guidance-parallel` over 2 ranks: the one guided stage's 4 passes two on each rank
    (the ranks log their pass groups); the final latents are the single process's, and the sidecar records the
    mode and no stage-2 setting (the command has no stage 2, so it offers no stage-2 flag)."""
    import ltx_pipelines.ti2vid_one_stage as one_stage
    import ltx_pipelines.ti2vid_one_stage_mgpu as one_stage_mgpu

    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    single, parallel = tmp_path / "single.mp4", tmp_path / "parallel.mp4"
    extra = ("--num-inference-steps", "2")
    assert one_stage.main(_argv(single, *extra)) == 0
    capfd.readouterr()
    assert one_stage_mgpu.main([*MGPU, *_argv(parallel, *extra), "--guidance-parallel", "--log-level", "INFO"]) == 0
    logged = capfd.readouterr().err
    assert logged.count("guidance parallel: 4 passes per step over 2 group(s) of 1 rank(s)") == 2, logged[-2000:]
    want = load_file(str(single.with_suffix(".latents.safetensors")))
    got = load_file(str(parallel.with_suffix(".latents.safetensors")))
    for name in ("video_latent", "audio_latent"):
        assert float((got[name] - want[name]).abs().max()) <= 1e-5, name
    sidecar = json.loads(parallel.with_suffix(".json").read_text())["parameters"]
    assert (sidecar["guidance_parallel"], sidecar["num_gpus"]) == (True, 2)
    assert "stage_2_parallel" not in sidecar


def test_one_stage_mgpu_offers_no_stage_2_flag(tmp_path, capsys):
    import ltx_pipelines.ti2vid_one_stage_mgpu as one_stage_mgpu

    err = _refused(one_stage_mgpu.main, [*MGPU, *_argv(tmp_path / "out.mp4"), "--stage-2-parallel", "tiled"], capsys)
    assert "unrecognized arguments: --stage-2-parallel tiled" in err
    assert not list(tmp_path.iterdir())
