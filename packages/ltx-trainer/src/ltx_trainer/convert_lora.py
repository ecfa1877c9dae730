"""`python -m ltx_trainer.convert_lora IN OUT --to comfyui|diffusers|kohya`: a LoRA file in another layout.

IN may be any layout `ltx_core.loader.lora_layouts` reads (ComfyUI/ltx-trainer, bare, peft, diffusers,
kohya). The factors are copied as they are (no precision change); alphas are kept where the target
layout stores them (see `lora_file_tensors`), so the converted file fuses to the same weights. OUT is
replaced only with --overwrite and appears only once complete; a failed write (a full disk, a read-only
folder) leaves nothing, and ends with one line.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer
from safetensors import SafetensorError
from safetensors.torch import save_file

from ltx_core.loader.lora_layouts import LoraLayout, lora_file_tensors, read_lora
from ltx_core.write_errors import write_failure
from ltx_pipelines.io.atomic_files import atomic_output, check_output_path
from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import run_or_exit

logger = logging.getLogger(__name__)

app = new_app("Convert a LoRA file between the comfyui, diffusers and kohya layouts.")

WRITABLE = (LoraLayout.COMFYUI, LoraLayout.DIFFUSERS, LoraLayout.KOHYA)


def convert_lora(source: str | Path, target: str | Path, to: LoraLayout | str, *, overwrite: bool = False) -> Path:
    """Write `source` in layout `to` at `target` (which must not exist unless `overwrite`); returns `target`.
    A failed write raises `OutputWriteError` (one line), with nothing left at `target`."""
    layout = LoraLayout.parse(to)
    if layout not in WRITABLE:
        raise ValueError(f"--to {layout.value!r}: writable layouts are {', '.join(w.value for w in WRITABLE)}")
    target = check_output_path(target, overwrite=overwrite)
    weights = read_lora(source)
    tensors, metadata = lora_file_tensors(weights, layout)
    try:
        with atomic_output(target, overwrite=overwrite) as tmp:
            save_file(tensors, str(tmp), metadata=metadata)
    except (OSError, SafetensorError) as exc:
        if (failure := write_failure(exc, target)) is None:
            raise
        raise failure from None
    logger.info(
        "%s (%s, %d modules) -> %s (%s)", source, weights.layout.value, len(weights.modules), target, layout.value
    )
    return target


@app.command()
def main(
    source: Path = typer.Argument(..., help="LoRA file to read (comfyui, bare, peft, diffusers or kohya layout)"),
    target: Path = typer.Argument(..., help="File to write (must not exist unless --overwrite)"),
    to: str = typer.Option(..., "--to", help="Layout to write: comfyui, diffusers or kohya"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace TARGET if it exists"),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)
    if to not in {w.value for w in WRITABLE}:
        raise typer.BadParameter(f"{to!r} is not one of {', '.join(w.value for w in WRITABLE)}", param_hint="--to")
    run_or_exit(lambda: convert_lora(source, target, to, overwrite=overwrite))


if __name__ == "__main__":
    app()
