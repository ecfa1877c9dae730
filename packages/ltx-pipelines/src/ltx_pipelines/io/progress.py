"""Progress display for the long parts of a run (denoising stages, decoding, encoding)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

logger = logging.getLogger(__name__)


def progress(
    iterable: Iterable[T],
    *,
    desc: str,
    total: int | None = None,
    unit: str = "it",
    enabled: bool | None = None,
) -> Iterator[T]:
    """Iterate `iterable` behind a tqdm bar named `desc`.

    `enabled=None` shows the bar only on an interactive terminal (tqdm's own rule), so logs of batch
    runs stay clean; the bar is removed when done and the elapsed time is logged instead.
    """
    disable = None if enabled is None else not enabled
    start = time.perf_counter()
    count = 0
    with tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, disable=disable, dynamic_ncols=True) as bar:
        for item in bar:
            count += 1
            yield item
    logger.info("%s: %d %s in %.1f s", desc, count, unit, time.perf_counter() - start)
