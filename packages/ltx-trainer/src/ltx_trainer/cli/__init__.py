"""What the `python -m ltx_trainer.<command>` modules share: the Typer app, logging, and one-line errors."""
