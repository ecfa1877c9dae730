"""Lazy inference outputs (decoded frame chunks) computed without autograd, leaving the caller's mode alone.

A `with torch.no_grad():` around a `yield` switches autograd off in the *caller's* code for as long as the
generator is suspended, and for good when the caller stops iterating early (a one-frame PNG takes only the
first chunk). A training loop that validates through the pipelines then trains without gradients.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

import torch

T = TypeVar("T")


def no_grad_items(items: Iterable[T]) -> Iterator[T]:
    """The items of `items`, each computed with autograd off; the caller's grad mode is untouched between
    items and after an abandoned iteration."""
    iterator = iter(items)
    while True:
        with torch.no_grad():
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item
