"""Lazily computed inference outputs leave the caller's autograd mode alone, also when abandoned."""

from __future__ import annotations

import torch

from ltx_core.no_grad_iteration import no_grad_items


def _chunks(seen: list[bool]):
    weight = torch.ones(2, requires_grad=True)
    for _ in range(3):
        seen.append(torch.is_grad_enabled())
        yield weight * 2


def test_items_are_computed_without_grad_and_the_caller_keeps_its_mode():
    seen: list[bool] = []
    items = no_grad_items(_chunks(seen))
    first = next(items)
    assert torch.is_grad_enabled()  # the caller's mode while the iteration is suspended
    assert not first.requires_grad
    del items  # abandoned after one item, as a one-frame PNG does
    assert torch.is_grad_enabled()
    assert seen == [False]


def test_a_plain_no_grad_block_around_yield_would_leak_into_the_caller():
    """Guards the test above: the naive form does switch autograd off in the caller."""

    def naive():
        with torch.no_grad():
            yield from _chunks([])

    items = naive()
    next(items)
    try:
        assert not torch.is_grad_enabled()
    finally:
        items.close()
    assert torch.is_grad_enabled()
