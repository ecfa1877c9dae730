"""Bad input turned into one clear line and an exit status, for every preprocessing command.

Exit status: 2 for input that is wrong before any work (`USER_ERRORS`, an output folder that is not
writable among them); 1 when the work failed on a file (`DataFileError`), an output could not be written
(`OutputWriteError`: a full disk) or nothing was done at all (`NothingDone`); 0 otherwise, partial
success included (the drop report lists what was left out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer

from ltx_core.loader import CheckpointError
from ltx_core.text_encoders.gemma.eight_bit import Gemma8bitUnavailable
from ltx_core.write_errors import OutputWriteError
from ltx_pipelines.io import MediaError
from ltx_trainer.preprocessing.buckets import BucketError
from ltx_trainer.preprocessing.dataset_file import DatasetFileError
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.precomputed import DataFileError

T = TypeVar("T")


class NothingDone(RuntimeError):
    """A command that had nothing to work on or whose every item failed."""


# Errors that mean "the input is wrong": reported as one line, exit code 2, no traceback.
USER_ERRORS = (
    BucketError,
    DatasetFileError,
    CheckpointError,
    MediaError,
    FileNotFoundError,
    FileExistsError,
    PermissionError,  # check_output_path: an output folder that is not writable
    IsADirectoryError,
    NotADirectoryError,
    Gemma8bitUnavailable,
)


def run_or_exit(work: Callable[[], T]) -> T:
    """Run `work`; a user error is printed as `error: ...` and exits with status 2."""
    try:
        return work()
    except USER_ERRORS as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except (DataFileError, NothingDone, OutputWriteError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


def exit_if_nothing_done(report: RunReport, what: str, advice: str) -> None:
    """Exit 1 with one line when every item of the run was dropped (`RunReport.nothing_done`); partial
    success returns (exit 0, the report lists the drops)."""
    if report.nothing_done:
        first = report.drops[0]
        count = len({d.path for d in report.drops})
        typer.echo(
            f"error: {what} failed or was dropped ({count} of {report.items or count}), nothing usable written "
            f"(first: {first.path}: {first.reason}); {advice}",
            err=True,
        )
        raise typer.Exit(1)
