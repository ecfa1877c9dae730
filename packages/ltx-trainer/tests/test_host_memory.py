"""glibc's mmap threshold, fixed for a CPU training process (training/host_memory.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ltx_trainer.training.host_memory import fix_mmap_threshold


def test_out_of_range_thresholds_are_refused():
    for bad in (0, -1, 64 * 2**20):
        with pytest.raises(ValueError, match="mmap threshold"):
            fix_mmap_threshold(bad)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux-only")
def test_a_freed_large_buffer_leaves_the_process_on_linux():
    """After a freed 8 MiB buffer glibc raises its threshold, so the next 4 MiB ones come from the heap and
    stay resident when freed between live blocks; with the threshold fixed they are unmapped. Each case runs
    in a fresh process (the threshold is a process setting)."""
    script = """
import ctypes, sys
sys.path[:0] = {path!r}
fixed = {fixed}
if fixed:
    from ltx_trainer.training.host_memory import fix_mmap_threshold
    assert fix_mmap_threshold(2**20)
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
libc.free(libc.malloc(8 << 20))
before = rss()
held, pins = [], []
for _ in range(16):
    p = libc.malloc(4 << 20)
    ctypes.memset(p, 1, 4 << 20)
    held.append(p)
    pins.append(libc.malloc(200 << 10))  # a live block above each one: the heap cannot shrink past it
for p in held:
    libc.free(p)
print((rss() - before) >> 20)
"""
    grown = {}
    for fixed in (False, True):
        code = script.format(path=sys.path, fixed=fixed)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        grown[fixed] = int(out.strip())
    if grown[False] < 32:
        pytest.skip(f"this C library returned freed heap memory by itself ({grown[False]} MiB kept)")
    assert grown[True] < 8 <= 32 <= grown[False], grown
