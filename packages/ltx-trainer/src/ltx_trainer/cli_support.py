"""What every preprocessing command shares: logging set-up and turning bad input into one clear line."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer

from ltx_core.loader import CheckpointError
from ltx_core.text_encoders.gemma.eight_bit import Gemma8bitUnavailable
from ltx_pipelines.media import MediaError
from ltx_trainer.buckets import BucketError
from ltx_trainer.cli_basics import configure_logging, new_app
from ltx_trainer.dataset_file import DatasetFileError

T = TypeVar("T")
__all__ = ["USER_ERRORS", "configure_logging", "new_app", "run_or_exit"]

# Errors that mean "the input is wrong": reported as one line, exit code 2, no traceback.
USER_ERRORS = (
    BucketError,
    DatasetFileError,
    CheckpointError,
    MediaError,
    FileNotFoundError,
    FileExistsError,
    Gemma8bitUnavailable,
)


def run_or_exit(work: Callable[[], T]) -> T:
    """Run `work`; a user error is printed as `error: ...` and exits with status 2."""
    try:
        return work()
    except USER_ERRORS as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
