"""Peak resident memory of a CPU training process: freed activations go back to the system.

glibc serves an allocation of at least its mmap threshold with its own mapping, unmapped when freed; smaller
ones come from its heaps, which keep freed memory for reuse. The threshold starts at 128 KiB but rises after
each freed mapping, up to 32 MiB, so after the first step nearly every activation of a small model comes from
the heaps, where freed blocks of one size rarely fit the next step's requests: the process grows by a share
of its activations on every new allocation pattern. Measured on the CPU LoRA step
(`benchmarks/trainer_memory_plan.py`, 2 blocks at 1/4 of the 22B widths, 1056 tokens): peak RSS 2.57 GiB
with the moving threshold, 2.08 GiB with a fixed one, the memory plan's estimate 2.00 GiB. Fixing the
threshold (what `mallopt(M_MMAP_THRESHOLD, ...)` does) keeps large tensors in their own mappings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

logger = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
# Tensors of at least 1 MiB get their own mapping: the activations of a step, not the small bookkeeping.
DEFAULT_MMAP_THRESHOLD = 2**20


def fix_mmap_threshold(threshold_bytes: int = DEFAULT_MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold for this process (Linux with glibc only); True when it was set.

    A process setting: the trainer calls it once when it trains on the CPU (`training.build`)."""
    if threshold_bytes <= 0 or threshold_bytes > 32 * 2**20:
        raise ValueError(f"mmap threshold must be in (0, 32 MiB], got {threshold_bytes} bytes")
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = mallopt(_M_MMAP_THRESHOLD, threshold_bytes) == 1
    if done:
        logger.debug("glibc mmap threshold fixed at %d bytes", threshold_bytes)
    return done
