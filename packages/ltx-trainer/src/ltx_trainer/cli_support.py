"""What every preprocessing command shares: logging set-up and turning bad input into one clear line."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TypeVar

import typer

from ltx_core.loader import CheckpointError
from ltx_pipelines.utils.media_io import MediaError
from ltx_trainer.buckets import BucketError
from ltx_trainer.dataset_file import DatasetFileError

T = TypeVar("T")

# Errors that mean "the input is wrong": reported as one line, exit code 2, no traceback.
USER_ERRORS = (BucketError, DatasetFileError, CheckpointError, MediaError, FileNotFoundError, FileExistsError)


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


def run_or_exit(work: Callable[[], T]) -> T:
    """Run `work`; a user error is printed as `error: ...` and exits with status 2."""
    try:
        return work()
    except USER_ERRORS as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def new_app(help_text: str) -> typer.Typer:
    return typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, help=help_text)
