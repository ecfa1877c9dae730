"""Logging set-up and the Typer app factory, without heavy imports (serve_captioner starts instantly)."""

from __future__ import annotations

import logging
import sys

import typer


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


def new_app(help_text: str) -> typer.Typer:
    """A Typer app. Help is drawn in rich panels on a terminal only: piped or captured (an agent, a log), rich
    assumes 80 columns and cuts long option names, so there click's plain, wrapped help is used."""
    return typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        no_args_is_help=True,
        help=help_text,
        rich_markup_mode="rich" if sys.stdout.isatty() else None,
    )
