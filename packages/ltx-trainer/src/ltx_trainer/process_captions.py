"""`python -m ltx_trainer.process_captions DATASET`: captions -> Gemma features in `conditions/`.

The stored features are the checkpoint's feature extractor output (before the embeddings
connectors, which training runs itself). `--lora-trigger` is prepended to every caption.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ltx_core.devices import resolve_device
from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit
from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import run_or_exit
from ltx_trainer.preprocessing.caption_features import compute_caption_features
from ltx_trainer.preprocessing.dataset_file import DatasetFileError, read_dataset, resolve_roles
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.sharding import current_shard, shard_device

app = new_app("Encode a dataset's captions with Gemma and the checkpoint's feature extractor.")


def process_captions(
    dataset_path: str | Path,
    *,
    output_dir: str | Path,
    model_path: str | Path,
    text_encoder_path: str | Path,
    caption_column: str = "caption",
    media_column: str | None = None,
    batch_size: int = 1,
    lora_trigger: str | None = None,
    remove_llm_prefixes: bool = False,
    device: str | None = None,
    overwrite: bool = False,
    load_text_encoder_in_8bit: bool = False,
) -> RunReport:
    if load_text_encoder_in_8bit:  # before reading anything
        require_gemma_8bit(resolve_device(shard_device(device)), "--load-text-encoder-in-8bit")
    dataset = read_dataset(dataset_path)
    if caption_column not in dataset.columns:
        raise DatasetFileError(
            f"{dataset.path.name} has no column {caption_column!r} (columns: {list(dataset.columns)}); "
            "pass --caption-column"
        )
    roles = resolve_roles(dataset.columns)
    if media_column is not None:
        if media_column not in dataset.columns:
            raise DatasetFileError(f"{dataset.path.name} has no column {media_column!r} (--media-column)")
        keys = [media_column]
    else:
        keys = [roles[r] for r in ("video", "audio") if r in roles]
        if not keys:
            raise DatasetFileError(
                f"{dataset.path.name} has no media column to name the outputs after "
                f"(columns: {list(dataset.columns)}); pass --media-column"
            )
    for name, path in (("--model-path", model_path), ("--text-encoder-path", text_encoder_path)):
        if not Path(path).exists():
            raise FileNotFoundError(f"{name} {str(path)!r} does not exist")
    report = RunReport()
    compute_caption_features(
        dataset,
        caption_column,
        keys,
        output_dir,
        checkpoint=model_path,
        text_encoder_path=text_encoder_path,
        report=report,
        lora_trigger=lora_trigger,
        strip_prefixes=remove_llm_prefixes,
        batch_size=batch_size,
        device=shard_device(device),
        overwrite=overwrite,
        shard=current_shard(),
        load_in_8bit=load_text_encoder_in_8bit,
    )
    return report


@app.command()
def main(
    dataset: Path = typer.Argument(..., help="Metadata file (.csv, .json or .jsonl)"),
    output_dir: Path = typer.Option(..., help="Folder for the features (e.g. <dataset dir>/.precomputed/conditions)"),
    model_path: Path = typer.Option(..., help="LTX-2 single-file checkpoint (its text feature extractor is used)"),
    text_encoder_path: Path = typer.Option(..., help="Gemma 3 folder"),
    caption_column: str = typer.Option("caption", help="Column with the captions"),
    media_column: str | None = typer.Option(None, help="Column the outputs are named after [default: video/audio]"),
    batch_size: int = typer.Option(1, help="Captions per Gemma forward"),
    lora_trigger: str | None = typer.Option(None, help="Word prepended to every caption"),
    remove_llm_prefixes: bool = typer.Option(False, help="Strip 'This video shows', 'Caption:' ... from captions"),
    device: str | None = typer.Option(None, help="Device [default: cuda if available, else cpu]"),
    overwrite: bool = typer.Option(False, help="Recompute outputs that already exist"),
    load_text_encoder_in_8bit: bool = typer.Option(
        False, help="8-bit Gemma (bitsandbytes LLM.int8(), about half the memory); needs CUDA and bitsandbytes"
    ),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)
    report = run_or_exit(
        lambda: process_captions(
            dataset,
            output_dir=output_dir,
            model_path=model_path,
            text_encoder_path=text_encoder_path,
            caption_column=caption_column,
            media_column=media_column,
            batch_size=batch_size,
            lora_trigger=lora_trigger,
            remove_llm_prefixes=remove_llm_prefixes,
            device=device,
            overwrite=overwrite,
            load_text_encoder_in_8bit=load_text_encoder_in_8bit,
        )
    )
    report.print()


if __name__ == "__main__":
    app()
