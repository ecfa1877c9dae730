"""The argument parser every `python -m` command uses: an argument error is one line, then a pointer to
`--help` (argparse's own error prints the whole usage block first, which buries the line that matters).

Light on purpose (argparse only): it is imported before any flag is parsed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

USAGE_ERROR_EXIT = 2


def help_hint(prog: str) -> str:
    """The line after an argument error: where the flags are described."""
    return f"run `{prog} --help` for the flags"


class CommandParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` (with `HelpFormatter` unless told otherwise) whose `error` prints
    `<prog>: error: <message>` and the `--help` pointer on stderr and exits with code 2 (the usage block stays
    in `--help`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n{help_hint(self.prog)}\n")
        sys.exit(USAGE_ERROR_EXIT)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows a variable-length flag's real argument list (`PATH FRAME_IDX STRENGTH [CRF]`)."""

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        shown = getattr(action, "display_metavar", None)
        return shown if shown is not None else super()._format_args(action, default_metavar)
