"""How a failed run ends on the command line: one line naming what failed and what to do, exit code 1.

Bad arguments never get here (argparse and validation exit with code 2 before any model is built).
Everything raised later - a checkpoint whose keys or shapes do not fit, a Gemma folder of the wrong
width, an image that turns out truncated, a full disk, exhausted memory - is turned into one line on
stderr; the traceback is printed only with `--log-level DEBUG`.
"""

from __future__ import annotations

import errno
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from ltx_core.write_errors import is_disk_full
from ltx_pipelines.io.atomic_files import OutputExistsError
from ltx_pipelines.io.errors import MediaError

if TYPE_CHECKING:
    pass

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # the shell's code for a run ended by Ctrl-C (128 + SIGINT)
# 128 + SIGTERM: what a shell reports for a job SIGTERM ended, so Slurm, docker, `timeout` and systemd
# see the stop they asked for (and the trainer's code for it; Ctrl-C keeps 130).
EXIT_TERMINATED = 143
_MAX_DETAIL = 1000
_NO_PERMISSION = {errno.EACCES, errno.EPERM, errno.EROFS}


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived. A KeyboardInterrupt, so everything that cleans up after Ctrl-C (temporary files,
    the latents kept) does the same for it."""


@dataclass
class StopSignal:
    """Whether SIGTERM arrived in a `stop_signals_interrupt` block. A signal landing inside C code (a
    safetensors read, a torch kernel) may come out as that code's own error, not as `Terminated`: the
    error line then still says the run was terminated, not that a model file or an input is bad."""

    received: bool = False


@contextmanager
def stop_signals_interrupt() -> Iterator[StopSignal]:
    """Within the block SIGTERM raises `Terminated` (like Ctrl-C's KeyboardInterrupt) and is recorded in the
    yielded `StopSignal`; the previous handler is restored after. Signal handlers belong to the main thread:
    elsewhere nothing changes."""
    state = StopSignal()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        state.received = True
        raise Terminated(f"stopped by signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class ErrorLine:
    text: str
    exit_code: int = EXIT_FAILED


def _detail(error: BaseException) -> str:
    """The error's message on one line, shortened (torch's memory reports run to many lines)."""
    text = " ".join(str(error).split())
    if not text:
        text = type(error).__name__
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, MemoryError):
        return True
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(error, oom):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def describe_error(error: BaseException, *, output_path: Path | None = None, terminated: bool = False) -> ErrorLine:
    """The line (without the `error:` prefix) and the exit code for `error`; `terminated`: SIGTERM arrived
    before it (`StopSignal.received`), so an ordinary error is the signal's doing."""
    from ltx_core.conditioning import ConditioningError
    from ltx_core.loader import CheckpointError
    from ltx_pipelines.cli.hf_paths import HfPathError
    from ltx_pipelines.engine.final_latents import NonFiniteLatentsError
    from ltx_pipelines.engine.latents_file import LatentsFileError

    if isinstance(error, Terminated) or (terminated and isinstance(error, Exception)):
        return ErrorLine("terminated (SIGTERM)", EXIT_TERMINATED)
    if isinstance(error, KeyboardInterrupt):
        return ErrorLine("interrupted", EXIT_INTERRUPTED)
    if _is_out_of_memory(error):
        return ErrorLine(
            f"out of memory ({_detail(error)}); try a smaller --height/--width/--num-frames, --dtype bfloat16, "
            "or close other programs using the GPU"
        )
    if is_disk_full(error):
        where = getattr(error, "filename", None) or (output_path.parent if output_path is not None else None)
        place = f" writing {str(where)!r}" if where else ""
        return ErrorLine(
            f"no space left on the disk{place}; free some space or choose an --output-path on another disk"
        )
    if isinstance(error, OSError) and error.errno in _NO_PERMISSION and error.filename:
        return ErrorLine(f"permission denied for {str(error.filename)!r} ({_detail(error)}); check its permissions")
    if isinstance(error, CheckpointError):
        return ErrorLine(f"{_detail(error)} (check that each model file is the one its flag expects)")
    if isinstance(
        error,
        (MediaError, HfPathError, ConditioningError, OutputExistsError, LatentsFileError, NonFiniteLatentsError),
    ):
        return ErrorLine(_detail(error))
    return ErrorLine(
        f"{type(error).__name__}: {_detail(error)} (run again with --log-level DEBUG to see where it happened)"
    )


def report_error(
    error: BaseException,
    *,
    debug: bool,
    output_path: Path | None = None,
    latents: Path | None = None,
    stream: TextIO | None = None,
    stop: StopSignal | None = None,
) -> int:
    """Print the one line for `error` (after the traceback when `debug`) and return the exit code.
    `latents`: where the run saved its denoised latents (the line then says how to finish the run);
    `stop`: the block's `StopSignal` (a SIGTERM before the error makes it a termination)."""
    stream = stream or sys.stderr
    if debug:
        traceback.print_exception(type(error), error, error.__traceback__, file=stream)
    line = describe_error(error, output_path=output_path, terminated=stop is not None and stop.received)
    text = line.text
    if latents is not None:
        target = output_path if output_path is not None else latents.with_name("output.mp4")
        text += (
            f"; the denoised latents are saved in {str(latents)!r}: finish with "
            f"python -m ltx_pipelines.decode --latents {shlex.quote(str(latents))} "
            f"--output-path {shlex.quote(str(target))}"
        )
    print(f"error: {text}", file=stream, flush=True)
    return line.exit_code
