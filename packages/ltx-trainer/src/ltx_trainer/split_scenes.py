"""`python -m ltx_trainer.split_scenes VIDEO OUTDIR`: cut a long video into one clip per scene.

Cuts are found with PySceneDetect; every scene is re-encoded with PyAV (H.264, with the source's
audio track as AAC), named `<stem>-Scene-001.mp4`, ... No external ffmpeg binary is needed.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ltx_pipelines.io import MediaError
from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import run_or_exit
from ltx_trainer.preprocessing.scenes import DETECTORS, split_scenes

app = new_app("Split a video into scenes (PySceneDetect) and write one re-encoded clip per scene.")


@app.command()
def main(
    video: Path = typer.Argument(..., help="Video file to split"),
    output_dir: Path = typer.Argument(..., help="Folder for the scene clips"),
    detector: str = typer.Option("content", "--detector", "-d", help=f"Detector: {'|'.join(DETECTORS)}"),
    threshold: float | None = typer.Option(None, help="Detector threshold [default: the detector's own]"),
    min_scene_length: int = typer.Option(15, help="Shortest scene the detector may produce, in frames"),
    filter_shorter_than: str | None = typer.Option(
        None, help="Drop scenes shorter than this: seconds ('2s'), frames ('48') or HH:MM:SS.sss"
    ),
    max_scenes: int | None = typer.Option(None, help="Write at most this many scenes"),
    skip_start: int = typer.Option(0, help="Frames trimmed off the start of every scene"),
    skip_end: int = typer.Option(0, help="Frames trimmed off the end of every scene"),
    save_images: int = typer.Option(0, help="Save N frames per scene and a scene_report.html"),
    stats_file: Path | None = typer.Option(None, help="Write the per-frame detector metrics to this CSV"),
    luma_only: bool = typer.Option(False, help="Content/adaptive detectors: use brightness only"),
    adaptive_window: int = typer.Option(2, help="Adaptive detector: frames on each side of the rolling average"),
    fade_bias: float = typer.Option(0.0, help="Threshold detector: where in a fade the cut goes (-1 start .. +1 end)"),
    downscale: int | None = typer.Option(None, help="Analyse frames downscaled by this factor [default: automatic]"),
    frame_skip: int = typer.Option(0, help="Analyse only every (N+1)-th frame (faster, less precise)"),
    overwrite: bool = typer.Option(False, help="Replace scene clips that already exist"),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)

    def work() -> list[Path]:
        try:
            return split_scenes(
                video,
                output_dir,
                detector=detector,
                threshold=threshold,
                min_scene_length=min_scene_length,
                filter_shorter_than=filter_shorter_than,
                max_scenes=max_scenes,
                skip_start=skip_start,
                skip_end=skip_end,
                save_images=save_images,
                stats_file=stats_file,
                luma_only=luma_only,
                adaptive_window=adaptive_window,
                fade_bias=fade_bias,
                downscale=downscale,
                frame_skip=frame_skip,
                overwrite=overwrite,
            )
        except ValueError as e:
            if isinstance(e, MediaError):
                raise
            raise typer.BadParameter(str(e)) from None

    for path in run_or_exit(work):
        typer.echo(str(path))


if __name__ == "__main__":
    app()
