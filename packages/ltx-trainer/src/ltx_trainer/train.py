"""`python -m ltx_trainer.train CONFIG.yaml [--disable-progress-bars]` (also under `accelerate launch`).

Exit status: 0 trained; 1 the run failed (a corrupt data file, a full disk, divergence, a refused resume);
2 a bad config or an output_dir in use by another training; 128 + the signal number when stopped by
SIGINT (130) or SIGTERM (143), after one line saying how to resume.

After a stop the process leaves through `os._exit` once the line is written, the logs flushed and the
output folder's lock released: the interpreter's teardown then runs no native destructor, which after a
stop in the middle of a step could crash (exit 139 instead of 143, seen in 5 of 15 stops).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from ltx_core.command_parser import CommandParser
from ltx_trainer.config import ConfigError, LtxTrainerConfig, load_config


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(prog="python -m ltx_trainer.train", description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="training config YAML (see packages/ltx-trainer/configs/)")
    parser.add_argument(
        "--demo",
        action="store_true",
        help="no config: train a few CPU steps on synthetic clips with the tiny demo models (training.demo)",
    )
    parser.add_argument("--demo-dir", default="outputs/demo-training", help="folder of the --demo run")
    parser.add_argument(
        "--disable-progress-bars",
        action="store_true",
        help="no progress bar; log one parseable line every --log-every steps instead",
    )
    parser.add_argument("--log-every", type=int, default=20, help="steps between log lines (default 20)")
    args = parser.parse_args(argv)
    if (args.config is None) == (not args.demo):
        parser.error("give a config file, or --demo (not both)")
    # force: each in-process call (tests, notebooks) writes to the stdout of that call, not a closed one
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout, force=True)
    if args.demo:
        from ltx_trainer.training.demo import demo_main

        return demo_main(args.demo_dir, disable_progress_bars=args.disable_progress_bars, log_every=args.log_every)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        _error_line(str(exc))
        return 2
    from ltx_trainer.training.checkpoints import CheckpointWriteError, ResumeError
    from ltx_trainer.training.data import DataFileError
    from ltx_trainer.training.interrupts import StopSignals
    from ltx_trainer.training.run_lock import OutputDirLocked
    from ltx_trainer.training.trainer import Trainer, TrainingDiverged, TrainingInterrupted

    try:
        with StopSignals():  # also while the models are built, before the loop installs its own
            trainer = Trainer(config, disable_progress_bars=args.disable_progress_bars, log_every=args.log_every)
            trainer.train()  # logs `saved <file>` for every checkpoint, the final one included
    except OutputDirLocked as exc:
        _error_line(str(exc))
        return 2
    except TrainingInterrupted as exc:
        _error_line(f"stopped by {exc.name}; {_resume_hint(config)}")
        return 128 + exc.signum
    except (ValueError, ResumeError, TrainingDiverged, DataFileError, CheckpointWriteError) as exc:
        _error_line(_one_line(exc))
        return 1
    return 0


def _error_line(text: str) -> None:
    """`error: <text>` on stderr in one write: the ranks of a data-parallel run share the launcher's stderr
    pipe, and `print` writes the text and its newline separately, so two ranks' lines could interleave."""
    sys.stderr.write(f"error: {text}\n")
    sys.stderr.flush()


def _one_line(exc: BaseException) -> str:
    """The message; for an error raised again from a DataLoader worker, the original message only (torch
    puts the worker's traceback in front of it)."""
    text = str(exc).strip()
    if "Original Traceback" not in text:
        return text
    return text.splitlines()[-1].split(": ", 1)[-1]


def _resume_hint(config: LtxTrainerConfig) -> str:
    from ltx_trainer.training.checkpoints import latest_complete

    folder = config.output_dir / "checkpoints"
    kept = latest_complete(folder)
    if kept is None:
        return "no checkpoint was saved yet; run the same command again to start over"
    return (
        f"the newest complete checkpoint is {kept.name}: to resume, set model.load_checkpoint: {str(folder)!r} "
        "in the config and run the same command again (append to the same log with >>)"
    )


def exit_after_stop(code: int) -> None:
    """Exit with `code` now, the streams and logs flushed, without the interpreter's teardown (see the
    module docstring). Everything the run must leave behind is done by then: the stop line is printed,
    temporary files are removed and the lock is released as the exception left their blocks."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    status = main()
    if status > 128:  # stopped by a signal
        exit_after_stop(status)
    sys.exit(status)
