"""`python -m ltx_trainer.compute_reference INPUT -o DATASET`: Canny-edge reference videos for IC-LoRA.

For every video (INPUT: a folder of videos, or the dataset file itself) an edge video is written
beside it as `<stem>_reference<ext>` and its path is put in the dataset's `reference_video` column
(rows are matched by their video / media_path; videos without a row get one). The dataset file is
rewritten atomically and its previous version kept as `<name>.bak`. Replace `edges_of` to make
other kinds of references (depth, pose, ...).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import run_or_exit
from ltx_trainer.preprocessing.reference_videos import compute_references

app = new_app("Make Canny-edge reference videos and add them to a dataset's reference_video column.")


@app.command()
def main(
    input_path: Path = typer.Argument(..., help="A folder of videos, or the dataset file itself"),
    output: Path = typer.Option(..., "--output", "-o", help="Dataset file (.json/.jsonl/.csv) to add the column to"),
    override: bool = typer.Option(False, help="Recompute reference videos that already exist"),
    batch_size: int = typer.Option(100, help="Frames processed at a time"),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)
    run_or_exit(lambda: compute_references(input_path, output, override=override, batch_size=batch_size)).print()


if __name__ == "__main__":
    app()
