"""Kernel paths chosen by timing them on this machine, not by a rule per dtype.

Where the fastest way to run an op depends on the machine (bf16 convolutions are 2x faster than
float32 on a CPU with AVX512-BF16 and ~25x slower on an AVX2 one; Winograd pays on some layer shapes
and not others; CPU SDPA's flash kernel against its math one), the op names its candidates and
`KernelChoices.choose` times each once (`time_call`), keeps the fastest for that op kind, dtype and
shape class (`OpKey`), and saves it in the user cache, one file per machine (`MachineKey`), so the
next process reads it instead of timing. Each path taken is logged once per key.

`LTX_KERNEL_PATH` forces paths (tests and comparisons): `kind=path` items separated by commas
(`conv3d-f32=winograd,sdpa=math`), or a bare path name, which applies to every kind that has it.
A forced path an op cannot take for a given call (Winograd on a 1x1 convolution) falls back to the
op's default there.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ltx_core.tune.machine import MachineKey, this_machine

logger = logging.getLogger(__name__)

FORCE_ENV = "LTX_KERNEL_PATH"
# "0": no timing and no cache file (every op on its default path unless forced): the test suite's setting.
TUNING_ENV = "LTX_KERNEL_TUNING"
CACHE_VERSION = 1

# Every op kind that is chosen by timing, and its paths (the default first).
KERNEL_PATHS: dict[str, tuple[str, ...]] = {
    # A half-precision video VAE on the CPU: activations and convolutions in the weights' dtype, or in
    # float32 (weights converted once, activations float32 between the layers).
    "vae-compute": ("native", "float32"),
    # One CPU float32 3-D convolution with replicate time padding: padded copy + oneDNN, edge frames
    # with merged time taps (no padded copy), Winograd F(4x4, 3x3) for plain 3x3x3 layers, Winograd
    # F(2, 3) in time (`video_vae.time_winograd`), over small frames one matrix product of the unfolded
    # input windows (`video_vae.conv_gemm`), or oneDNN on channels-last copies.
    "conv3d-f32": ("direct", "merged", "winograd", "time-winograd", "gemm", "channels-last"),
    # One CPU half-precision 3-D convolution computed in its dtype (native bf16/fp16): oneDNN's direct
    # convolution of the padded input, Winograd F(2, 3) in time (four 2-D convolutions per pair of
    # output frames instead of six, `video_vae.time_winograd`), over small frames one matrix product
    # of the unfolded input windows (`video_vae.conv_gemm`), or oneDNN on channels-last copies.
    "conv3d-half": ("direct", "time-winograd", "gemm", "channels-last"),
    # PyTorch SDPA's kernel on the CPU.
    "sdpa": ("flash", "math"),
    # A half-precision Linear on the CPU, or the same in float32 (`ltx_core.tune.matmul`).
    "matmul": ("native", "float32"),
    # An RMS norm on the CPU: torch's unfused passes, or its fused layer norm over [x, -x] (`ltx_core.tune.norm`).
    "rms-norm": ("composite", "mirrored"),
}

# Paths timed within this fraction of the fastest are timed again before one is taken.
CLOSE_CALL = 0.25

# Below this many multiply-adds per call an op takes its default without timing: the timings would be
# noise, the difference microseconds (and the test suite's tiny models never time anything).
MIN_TUNED_WORK = 2e8

# (path name, a call that runs it once) -> seconds; tests inject timings by name.
Timer = Callable[[str, Callable[[], object]], float]


@dataclass(frozen=True)
class OpKey:
    """What one decision is for: an op kind of `KERNEL_PATHS`, the dtype it computes in, a shape class."""

    kind: str
    dtype: str
    shape_class: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.dtype}/{self.shape_class}"


@dataclass(frozen=True)
class Decision:
    path: str
    seconds: Mapping[str, float] = field(default_factory=dict)


def size_class(n: int) -> int:
    """The power of two at or below `n` (>= 1): sizes within a factor 2 share a decision."""
    return 1 << max(int(n), 1).bit_length() - 1


def choose_fastest(seconds: Mapping[str, float], default: str, margin: float = 0.05) -> str:
    """The fastest path by `seconds`; the default unless another is more than `margin` faster (a
    difference within timing noise is no reason to leave the path that needs no extra memory)."""
    if not seconds:
        return default
    fastest = min(seconds, key=seconds.__getitem__)
    if default in seconds and seconds[default] <= seconds[fastest] * (1.0 + margin):
        return default
    return fastest


def time_call(path: str, fn: Callable[[], object], repeats: int = 2, long_call: float = 0.3) -> float:
    """Seconds of one `fn()` call: the least of `repeats` runs after a warm-up one (oneDNN creates
    its primitives on the first call; the least is the run least disturbed by other processes). A
    call whose warm-up took over `long_call` seconds runs once more only: timing is paid once per
    machine, but on the first run of a large model."""
    with torch.no_grad():
        began = time.perf_counter()
        fn()
        warm_up = time.perf_counter() - began
        best = math.inf
        for _ in range(1 if warm_up > long_call else repeats):
            began = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - began)
    return best


def parse_forced(spec: str | None) -> dict[str, str]:
    """`LTX_KERNEL_PATH`'s value -> {kind: path}; raises naming the accepted kinds and paths."""
    forced: dict[str, str] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        kind, sep, path = item.partition("=")
        if sep:
            kind, path = kind.strip(), path.strip()
            if path not in KERNEL_PATHS.get(kind, ()):
                accepted = "; ".join(f"{k}={'|'.join(p)}" for k, p in KERNEL_PATHS.items())
                raise ValueError(f"{FORCE_ENV} item {item!r} names no kernel path; accepted: {accepted}")
            forced[kind] = path
            continue
        kinds = [k for k, paths in KERNEL_PATHS.items() if item in paths]
        if not kinds:
            names = sorted({p for paths in KERNEL_PATHS.values() for p in paths})
            raise ValueError(f"{FORCE_ENV} path {item!r} is unknown; accepted: {', '.join(names)} or KIND=PATH")
        forced.update(dict.fromkeys(kinds, item))
    return forced


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/ltx/kernels, else ~/.cache/ltx/kernels."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ltx" / "kernels"


class KernelChoices:
    """This machine's kernel decisions: read from its cache file on creation, timed and added on first
    use of an op key, written back after each new decision. Models own one (see `attach`)."""

    def __init__(
        self,
        machine: MachineKey,
        cache_file: Path | None = None,
        *,
        forced: Mapping[str, str] | None = None,
        timer: Timer = time_call,
        min_work: float = MIN_TUNED_WORK,
    ) -> None:
        self.machine = machine
        self.cache_file = cache_file
        self.forced = dict(forced or {})
        self.timer = timer
        self.min_work = min_work
        self.decisions: dict[str, Decision] = self._read() if cache_file is not None else {}
        self._logged: set[str] = set()

    @classmethod
    def load(
        cls,
        cache_dir: Path | str | None = None,
        *,
        machine: MachineKey | None = None,
        forced: Mapping[str, str] | None = None,
        timer: Timer = time_call,
    ) -> KernelChoices:
        """The decisions of `machine` (this one by default) from `cache_dir` (the user cache by default);
        `forced` None reads `LTX_KERNEL_PATH`. With `LTX_KERNEL_TUNING=0`, defaults and forced paths only."""
        machine = this_machine() if machine is None else machine
        forced = parse_forced(os.environ.get(FORCE_ENV)) if forced is None else forced
        if os.environ.get(TUNING_ENV, "1") == "0":
            return cls(machine, None, forced=forced, min_work=math.inf)
        folder = default_cache_dir() if cache_dir is None else Path(cache_dir)
        return cls(machine, folder / f"{machine.fingerprint()}.json", forced=forced, timer=timer)

    @classmethod
    def fixed(cls, forced: Mapping[str, str] | str) -> KernelChoices:
        """Choices that never time nor touch the disk: `forced` paths, every other op on its default."""
        if isinstance(forced, str):
            forced = parse_forced(forced)
        return cls(this_machine(), None, forced=forced, min_work=math.inf)

    # -- the decision ------------------------------------------------------------------------------
    def choose(
        self,
        key: OpKey,
        candidates: Mapping[str, Callable[[], object]],
        *,
        default: str,
        work: float = math.inf,
        timeable: bool = True,
    ) -> str:
        """The path for `key` among `candidates` (name -> a call that runs it once at a representative
        size), timing them the first time a key of at least `min_work` multiply-adds is met. `timeable` False:
        a decision already made is used, else the default (nothing is timed or recorded)."""
        if key.kind not in KERNEL_PATHS:
            raise ValueError(f"op kind {key.kind!r} is not tuned; known: {', '.join(KERNEL_PATHS)}")
        forced = self.forced.get(key.kind)
        if forced is not None:
            return self._taken(key, forced if forced in candidates else default, "forced")
        if len(candidates) == 1:
            return next(iter(candidates))
        known = self.decisions.get(str(key))
        # A decision stands while it weighed every candidate offered now: a path added in a later
        # version (or one that applies to this input only) is timed against the others.
        if known is not None and known.path in candidates and set(candidates) <= set(known.seconds):
            return self._taken(key, known.path, "cached")
        if work < self.min_work or math.isinf(self.min_work):
            return self._taken(key, default, "default, below the tuning size")
        if not timeable:
            return self._taken(key, default, "default, not timed here")
        seconds: dict[str, float] = {}
        for name, run in candidates.items():
            try:
                seconds[name] = self.timer(name, run)
            except RuntimeError as error:  # a kernel that cannot serve this input is no candidate
                logger.debug("kernel path %s for %s failed: %s", name, key, error)
                seconds[name] = math.inf  # weighed (and not timed again), never the fastest
        best = min(seconds.values(), default=math.inf)
        close = [name for name, s in seconds.items() if s < best * (1.0 + CLOSE_CALL)]
        if len(close) > 1:
            # A close call on a shared machine may be decided by another process's burst: the close
            # paths are timed once more, one after the other, and each keeps its least time.
            for name in close:
                seconds[name] = min(seconds[name], self.timer(name, candidates[name]))
        path = choose_fastest(seconds, default)
        self.decisions[str(key)] = Decision(path, seconds)
        self._write()
        timings = ", ".join(f"{name} {s * 1e3:.1f} ms" for name, s in seconds.items())
        return self._taken(key, path, f"timed: {timings}")

    def _taken(self, key: OpKey, path: str, why: str) -> str:
        if str(key) not in self._logged:  # once per key and owner, not once per call
            self._logged.add(str(key))
            logger.info("kernel path %s -> %s (%s)", key, path, why)
        return path

    # -- the cache file ----------------------------------------------------------------------------
    def _read(self) -> dict[str, Decision]:
        assert self.cache_file is not None
        try:
            data = json.loads(self.cache_file.read_text())
            if data.get("version") != CACHE_VERSION or MachineKey.from_json(data["machine"]) != self.machine:
                # Same file name from another machine or torch (or an older layout): time again.
                logger.info("kernel cache %s was made elsewhere; its decisions are not used", self.cache_file)
                return {}
            return {k: Decision(v["path"], v.get("seconds", {})) for k, v in data["decisions"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("kernel cache %s unreadable (%s); timing again", self.cache_file, error)
            return {}

    def _write(self) -> None:
        if self.cache_file is None:
            return
        merged = {**self._read(), **self.decisions}  # another process may have added keys meanwhile
        data = {
            "version": CACHE_VERSION,
            "machine": self.machine.to_json(),
            "decisions": {k: {"path": d.path, "seconds": dict(d.seconds)} for k, d in sorted(merged.items())},
        }
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            # Written whole under a temporary name, then renamed: a reader never sees half a file.
            fd, tmp = tempfile.mkstemp(prefix=".kernels-", dir=self.cache_file.parent)
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=1)
                os.replace(tmp, self.cache_file)
            finally:
                Path(tmp).unlink(missing_ok=True)
        except OSError as error:
            logger.warning("kernel decisions not saved to %s (%s); they hold for this process", self.cache_file, error)


def attach(model: torch.nn.Module, choices: KernelChoices | None) -> None:
    """Give `choices` to every submodule of `model` that takes kernel decisions (`use_kernel_choices`)
    (None: every op on its default path)."""
    for module in model.modules():
        use = getattr(module, "use_kernel_choices", None)
        if use is not None:
            use(choices)


def owned_choices(model: torch.nn.Module, device: torch.device) -> KernelChoices | None:
    """`model.kernel_choices`, loaded from this machine's cache file and attached to its layers on
    the first CPU call (a model that only ever runs elsewhere never reads it)."""
    choices = getattr(model, "kernel_choices", None)
    if choices is None and device.type == "cpu":
        choices = KernelChoices.load()
        attach(model, choices)
    return choices
