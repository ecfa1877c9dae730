"""Guidance-parallel sampling over 2 and 4 gloo CPU processes gives the single-process latents."""

from __future__ import annotations

import copy

import pytest
import torch
from rank_jobs import guidance_parallel_sampling_job, sample

from ltx_core.components.denoisers import guidance_passes
from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.model.transformer import ModelVariant, configure_transformer
from ltx_core.multigpu.guidance_parallel import pass_group_count
from ltx_core.multigpu.launch import computing_as_a_rank, run_ranks
from ltx_core.types import LatentState

from ..transformer.conftest import TINY_TRANSFORMER, _positions, randomize_

# Heads that 2 ranks divide (the 4-process case runs each pass sequence parallel over 2 ranks).
HEADS = {
    "num_attention_heads": 2, "attention_head_dim": 4, "cross_attention_dim": 8,
    "audio_num_attention_heads": 2, "audio_attention_head_dim": 2, "audio_cross_attention_dim": 4,
}  # fmt: skip
ALL_PASSES = {  # cond, uncond, perturbed, isolated: 4 passes
    "video": MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(1,), modality_scale=3.0),
    "audio": MultiModalGuiderParams(cfg_scale=7.0, stg_scale=1.0, stg_blocks=(1,), modality_scale=3.0, skip_step=1),
}
CFG_STG = {  # cond, uncond, perturbed: 3 passes
    "video": MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(0,)),
    "audio": MultiModalGuiderParams(cfg_scale=7.0),
}


def _model():
    config = {"transformer": {**copy.deepcopy(TINY_TRANSFORMER), **HEADS}}
    return randomize_(configure_transformer(config, ModelVariant.AUDIO_VIDEO), seed=5).eval()


def _sampling(guidance: dict[str, MultiModalGuiderParams]) -> dict:
    """Noise, contexts and guidance of a 2-step run: 13 video and 7 audio tokens (odd counts, so the
    sequence-parallel groups pad), a conditioned first video token."""
    g = torch.Generator().manual_seed(11)
    mask = torch.ones(1, 13, 1)
    mask[:, 0] = 0.0
    video = LatentState(torch.randn(1, 13, 16, generator=g), mask, _positions(1, 13, 3, 0.25), torch.zeros(1, 13, 16))
    audio = LatentState(torch.randn(1, 7, 8, generator=g), torch.ones(1, 7, 1), _positions(1, 7, 1, 0.04),
                        torch.zeros(1, 7, 8))  # fmt: skip
    contexts = [torch.randn(1, 5, width, generator=g) for width in (8, 4, 8, 4)]
    return {"video": video, "audio": audio, "contexts": contexts, "guidance": guidance,
            "sigmas": torch.tensor([1.0, 0.55, 0.0])}  # fmt: skip


def _run(
    world: int, guidance: dict[str, MultiModalGuiderParams], tmp_path
) -> tuple[list[dict], torch.Tensor, torch.Tensor]:
    model, sampling = _model(), _sampling(guidance)
    out = tmp_path / "gp.pt"
    passes = len(guidance_passes(guidance))
    run_ranks(guidance_parallel_sampling_job, world, args=(model, sampling, passes, str(out)), timeout_s=120)
    ranks = [torch.load(f"{out}.{rank}") for rank in range(world)]
    with torch.inference_mode(), computing_as_a_rank(world):
        want_video, want_audio = sample(model, sampling, None)
    return ranks, want_video, want_audio


@pytest.mark.slow
def test_passes_on_separate_ranks_equal_one_process_bit_for_bit(tmp_path):
    """4 passes (the audio guidance skipping every other step) over 2 ranks, 2 passes each: every rank ends on
    exactly the single-process latents."""
    ranks, want_video, want_audio = _run(2, ALL_PASSES, tmp_path)
    for rank, got in enumerate(ranks):
        assert got["groups"] == (2, 1, 1), f"rank {rank}: {got['groups']}"
        assert torch.equal(got["video"], want_video), f"rank {rank} video differs"
        assert torch.equal(got["audio"], want_audio), f"rank {rank} audio differs"


@pytest.mark.slow
def test_pass_groups_run_sequence_parallel_when_ranks_outnumber_passes(tmp_path):
    """3 passes over 4 ranks: 2 groups of 2 (the first runs 2 passes), each pass sequence parallel over its
    group; every rank ends on the single-process latents (to the sequence-parallel rounding)."""
    ranks, want_video, want_audio = _run(4, CFG_STG, tmp_path)
    for rank, got in enumerate(ranks):
        assert got["groups"] == (2, 2, 2), f"rank {rank}: {got['groups']}"
        torch.testing.assert_close(got["video"], want_video, rtol=0, atol=1e-5)
        torch.testing.assert_close(got["audio"], want_audio, rtol=0, atol=1e-5)
        assert torch.equal(got["video"], ranks[0]["video"]) and torch.equal(got["audio"], ranks[0]["audio"])


@pytest.mark.parametrize(
    ("world", "passes", "count"),
    [(2, 4, 2), (3, 4, 3), (4, 4, 4), (4, 2, 2), (6, 4, 3), (8, 4, 4), (8, 3, 2), (5, 2, 1)],
)
def test_pass_group_count_is_the_largest_divisor_not_above_the_passes(world, passes, count):
    assert pass_group_count(world, passes) == count


def test_bad_pass_group_count_is_a_clear_error():
    with pytest.raises(ValueError, match="world size and pass count must be >= 1"):
        pass_group_count(2, 0)
