"""The per-sample text context cache gives the connectors' own output and runs them once per sample."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_trainer.training.context_cache import CachedTextContexts, contexts_bytes_per_sample


class CountingConnectors(nn.Module):
    """Row-wise maps standing in for the connectors; counts the rows they are run on."""

    def __init__(self) -> None:
        super().__init__()
        self.video = nn.Linear(6, 5)
        self.audio = nn.Linear(6, 3)
        self.rows_run = 0

    def forward(self, video, audio, mask) -> TextContexts:
        self.rows_run += video.shape[0]
        return TextContexts(video=self.video(video) * mask[..., None], audio=self.audio(audio), mask=mask.long())


def _batch(ids: list[int], tokens: int = 4):
    g = [torch.Generator().manual_seed(100 + i) for i in ids]
    video = torch.stack([torch.randn(tokens, 6, generator=x) for x in g])
    audio = torch.stack([torch.randn(tokens, 6, generator=x) for x in g])
    mask = torch.stack([(torch.arange(tokens) < 2 + i % 2).long() for i in ids])
    return video, audio, mask


def test_cached_rows_equal_the_connectors_output_and_run_once():
    connectors = CountingConnectors()
    cache = CachedTextContexts(connectors)
    for ids in ([0, 1], [1, 0], [2, 1], [0, 2], [2, 0]):
        got = cache(*_batch(ids), ids)
        with torch.no_grad():
            want = connectors(*_batch(ids))
        assert torch.equal(got.video, want.video) and torch.equal(got.audio, want.audio)
        assert torch.equal(got.mask, want.mask)
    # direct reference calls above ran 10 rows; the cache ran [0, 1] and [2, 1] only
    assert connectors.rows_run == 10 + 4
    assert len(cache) == 3


def test_budget_bounds_the_kept_rows_and_recomputes_the_rest():
    connectors = CountingConnectors()
    one = contexts_bytes_per_sample(tokens=4, video_dim=5, audio_dim=3)
    cache = CachedTextContexts(connectors, budget_bytes=one)
    cache(*_batch([0]), [0])
    cache(*_batch([1]), [1])
    assert len(cache) == 1 and cache.used_bytes == one
    cache(*_batch([1]), [1])
    cache(*_batch([0]), [0])
    assert connectors.rows_run == 3  # sample 1 twice, sample 0 once


def test_a_different_token_count_is_recomputed():
    connectors = CountingConnectors()
    cache = CachedTextContexts(connectors)
    cache(*_batch([0], tokens=4), [0])
    got = cache(*_batch([0], tokens=6), [0])
    assert got.video.shape[1] == 6 and connectors.rows_run == 2


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="budget"):
        CachedTextContexts(CountingConnectors(), budget_bytes=-1)
    with pytest.raises(ValueError, match="sample ids"):
        CachedTextContexts(CountingConnectors())(*_batch([0, 1]), [0])


def _samples(ids: list[int]):
    for i in ids:
        video, audio, mask = _batch([i])
        yield i, video, audio, mask


def test_precompute_keeps_every_sample_then_releases_the_connectors():
    connectors = CountingConnectors()
    cache = CachedTextContexts(connectors)
    assert cache.precompute(_samples([0, 1, 2]), count=3)
    assert cache.connectors is None and connectors.rows_run == 3
    got = cache(*_batch([2, 0]), [2, 0])  # from the kept rows: the released connectors are not needed
    with torch.no_grad():
        want = connectors(*_batch([2, 0]))
    assert torch.equal(got.video, want.video) and torch.equal(got.audio, want.audio)
    with pytest.raises(RuntimeError, match=r"samples \[3\].*released"):
        cache(*_batch([3]), [3])
    with pytest.raises(RuntimeError, match="precompute runs once"):
        cache.precompute(_samples([0]), count=1)


def test_precompute_over_the_budget_keeps_the_connectors():
    connectors = CountingConnectors()
    one = contexts_bytes_per_sample(tokens=4, video_dim=5, audio_dim=3)
    cache = CachedTextContexts(connectors, budget_bytes=2 * one)
    assert not cache.precompute(_samples([0, 1, 2, 3]), count=4)
    assert cache.connectors is connectors and len(cache) == 2
    assert connectors.rows_run == 3  # stopped at the first sample over the budget
    cache(*_batch([3]), [3])  # the loop still runs the connectors for the rest
    assert connectors.rows_run == 4
    assert not CachedTextContexts(CountingConnectors()).precompute(_samples([0]), count=2)  # fewer than the dataset
