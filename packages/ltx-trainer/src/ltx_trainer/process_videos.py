"""`python -m ltx_trainer.process_videos DATASET`: clips -> video VAE latents (and optionally audio latents).

Each clip goes to a resolution bucket (closest aspect ratio, then most frames, then largest area,
among the buckets it is long enough for), is scaled to cover it (bicubic) and cropped, and its first
F frames are encoded. Clips shorter than every bucket are dropped and listed at the end.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import run_or_exit
from ltx_trainer.preprocessing.audio_latents import compute_audio_latents
from ltx_trainer.preprocessing.buckets import parse_buckets
from ltx_trainer.preprocessing.dataset_file import DatasetFile, DatasetFileError, read_dataset, resolve_roles
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.media import CROP_MODES
from ltx_trainer.preprocessing.models import LazyModels, ModelSources
from ltx_trainer.preprocessing.sharding import current_shard, shard_device
from ltx_trainer.preprocessing.video_latents import compute_video_latents

app = new_app("Encode a dataset's clips into video (and audio) latents, bucketed by size and length.")


def process_videos(
    dataset_path: str | Path,
    *,
    resolution_buckets: str,
    output_dir: str | Path,
    model_path: str | Path | None,
    video_vae_path: str | Path | None = None,
    audio_vae_path: str | Path | None = None,
    video_column: str | None = None,
    vae_tiling: bool = False,
    reshape_mode: str = "center",
    seed: int = 0,
    with_audio: bool = False,
    audio_output_dir: str | Path | None = None,
    device: str | None = None,
    overwrite: bool = False,
) -> RunReport:
    buckets = parse_buckets(resolution_buckets)
    if reshape_mode not in CROP_MODES:
        raise typer.BadParameter(f"--reshape-mode {reshape_mode!r}; accepted: {', '.join(CROP_MODES)}")
    dataset = read_dataset(dataset_path)
    column = _video_column(dataset, video_column)
    sources = ModelSources(
        Path(model_path) if model_path else None,
        Path(video_vae_path) if video_vae_path else None,
        Path(audio_vae_path) if audio_vae_path else None,
    ).check()
    sources.video_path()
    report, shard = RunReport(), current_shard()
    with LazyModels(sources, device=shard_device(device)) as models:
        compute_video_latents(
            dataset,
            column,
            buckets,
            output_dir,
            models,
            report=report,
            vae_tiling=vae_tiling,
            crop_mode=reshape_mode,
            seed=seed,
            overwrite=overwrite,
            shard=shard,
        )
        if with_audio:
            audio_dir = Path(audio_output_dir) if audio_output_dir else Path(output_dir).parent / "audio_latents"
            compute_audio_latents(
                dataset,
                column,
                audio_dir,
                models,
                report=report,
                video_column=column,
                latents_dir=output_dir,
                overwrite=overwrite,
                shard=shard,
            )
    return report


def _video_column(dataset: DatasetFile, video_column: str | None) -> str:
    roles = resolve_roles(dataset.columns, {"video": video_column})
    if "video" not in roles:
        raise DatasetFileError(
            f"{dataset.path.name} has no video column (columns: {list(dataset.columns)}); "
            "expected 'video' or 'media_path', or pass --video-column"
        )
    return roles["video"]


@app.command()
def main(
    dataset: Path = typer.Argument(..., help="Metadata file (.csv, .json or .jsonl); media paths relative to it"),
    resolution_buckets: str = typer.Option(..., help="Buckets 'WxHxF;...' (W, H multiples of 32, F = 8k+1)"),
    output_dir: Path = typer.Option(..., help="Folder for the latents (e.g. <dataset dir>/.precomputed/latents)"),
    model_path: Path = typer.Option(..., help="LTX-2 single-file checkpoint (.safetensors)"),
    video_vae_path: Path | None = typer.Option(None, help="Video VAE file when not in --model-path"),
    audio_vae_path: Path | None = typer.Option(None, help="Audio VAE file when not in --model-path"),
    video_column: str | None = typer.Option(None, help="Column with the clip paths [default: video or media_path]"),
    vae_tiling: bool = typer.Option(False, help="Encode in 512-pixel tiles (less memory)"),
    reshape_mode: str = typer.Option("center", help=f"Crop to the bucket: {'|'.join(CROP_MODES)}"),
    seed: int = typer.Option(0, help="Seed for random crops"),
    with_audio: bool = typer.Option(False, help="Also encode each clip's audio track"),
    audio_output_dir: Path | None = typer.Option(None, help="Folder for audio latents [default: ../audio_latents]"),
    device: str | None = typer.Option(None, help="Device [default: cuda if available, else cpu]"),
    overwrite: bool = typer.Option(False, help="Recompute outputs that already exist"),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)
    report = run_or_exit(
        lambda: process_videos(
            dataset,
            resolution_buckets=resolution_buckets,
            output_dir=output_dir,
            model_path=model_path,
            video_vae_path=video_vae_path,
            audio_vae_path=audio_vae_path,
            video_column=video_column,
            vae_tiling=vae_tiling,
            reshape_mode=reshape_mode,
            seed=seed,
            with_audio=with_audio,
            audio_output_dir=audio_output_dir,
            device=device,
            overwrite=overwrite,
        )
    )
    report.print()


if __name__ == "__main__":
    app()
