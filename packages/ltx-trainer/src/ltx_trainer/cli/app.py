"""Logging set-up and the Typer app factory, without heavy imports (serve_captioner starts instantly)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import typer

# Typer ships its own copy of click: the errors its commands raise are that copy's classes.
from typer._click import Context
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperCommand

from ltx_core.command_parser import USAGE_ERROR_EXIT, help_hint


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


class OneLineErrorCommand(TyperCommand):
    """A command whose argument errors print one line (`error: <what is wrong>`) and the `--help` pointer, exit
    code 2: click's own report puts the usage line first and the error last."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except NoArgsIsHelpError:
            raise  # no arguments at all: the help is the answer
        except UsageError as e:
            typer.echo(f"error: {e.format_message()}\n{help_hint(ctx.command_path)}", err=True)
            ctx.exit(USAGE_ERROR_EXIT)


class App(typer.Typer):
    """A Typer app whose commands report argument errors in one line (`OneLineErrorCommand`)."""

    def command(self, *args: Any, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        return super().command(*args, cls=cls or OneLineErrorCommand, **kwargs)


def new_app(help_text: str) -> typer.Typer:
    """A Typer app. Help is drawn in rich panels on a terminal only: piped or captured (an agent, a log), rich
    assumes 80 columns and cuts long option names, so there click's plain, wrapped help is used."""
    return App(
        add_completion=False,
        pretty_exceptions_enable=False,
        no_args_is_help=True,
        help=help_text,
        rich_markup_mode="rich" if sys.stdout.isatty() else None,
    )
