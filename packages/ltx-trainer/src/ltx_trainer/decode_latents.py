"""`python -m ltx_trainer.decode_latents LATENTS OUT`: precomputed latents back to media, for checking.

Video latents become .mp4 files (1-frame samples .png), mirroring the names under LATENTS; with
`--with-audio`, audio latents (default: the `audio_latents` folder beside LATENTS) become .wav files.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import NothingDone, run_or_exit
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.latent_previews import decode_audio_folder, decode_video_folder
from ltx_trainer.preprocessing.models import LazyModels, ModelSources
from ltx_trainer.preprocessing.precomputed import AUDIO_LATENTS, DECODED_AUDIO, find_samples

app = new_app("Decode precomputed latents to mp4/png (video) and wav (audio) previews.")


def decode_latents(
    latents_dir: str | Path,
    output_dir: str | Path,
    *,
    model_path: str | Path | None,
    video_vae_path: str | Path | None = None,
    audio_vae_path: str | Path | None = None,
    vae_tiling: bool = False,
    seed: int = 42,
    with_audio: bool = False,
    audio_latents_dir: str | Path | None = None,
    audio_output_dir: str | Path | None = None,
    device: str | None = None,
    overwrite: bool = False,
) -> RunReport:
    latents_dir, output_dir = Path(latents_dir), Path(output_dir)
    if not latents_dir.is_dir():
        raise FileNotFoundError(f"latents folder {str(latents_dir)!r} does not exist")
    if not find_samples(latents_dir):
        raise NothingDone(
            f"latents folder {str(latents_dir)!r} holds no latents files (.safetensors / .pt); give the folder "
            "process_dataset wrote, e.g. <dataset>/.precomputed/latents"
        )
    sources = ModelSources(
        Path(model_path) if model_path else None,
        Path(video_vae_path) if video_vae_path else None,
        Path(audio_vae_path) if audio_vae_path else None,
    ).check()
    audio_in = Path(audio_latents_dir) if audio_latents_dir else latents_dir.parent / AUDIO_LATENTS
    audio_out = Path(audio_output_dir) if audio_output_dir else output_dir.parent / DECODED_AUDIO
    if with_audio and not audio_in.is_dir():
        raise FileNotFoundError(f"audio latents folder {str(audio_in)!r} does not exist (--audio-latents-dir)")
    report = RunReport()
    with LazyModels(sources, device=device) as models:
        decode_video_folder(
            latents_dir, output_dir, models, report=report, vae_tiling=vae_tiling, seed=seed, overwrite=overwrite
        )
        if with_audio:
            decode_audio_folder(audio_in, audio_out, models, report=report, overwrite=overwrite)
    return report


@app.command()
def main(
    latents_dir: Path = typer.Argument(..., help="Folder of video latents (e.g. .precomputed/latents)"),
    output_dir: Path = typer.Argument(..., help="Folder for the decoded videos"),
    model_path: Path | None = typer.Option(None, help="LTX-2 single-file checkpoint (VAE decoders, vocoder)"),
    video_vae_path: Path | None = typer.Option(None, help="Video VAE file when not in --model-path"),
    audio_vae_path: Path | None = typer.Option(None, help="Audio VAE + vocoder file when not in --model-path"),
    vae_tiling: bool = typer.Option(False, help="Decode in 512-pixel tiles (less memory)"),
    seed: int = typer.Option(42, help="Seed of the decoder's noise (timestep-conditioned VAEs)"),
    with_audio: bool = typer.Option(False, help="Also decode audio latents to .wav"),
    audio_latents_dir: Path | None = typer.Option(None, help="Audio latents [default: audio_latents beside LATENTS]"),
    audio_output_dir: Path | None = typer.Option(
        None, help="Folder for .wav files [default: decoded_audio beside OUT]"
    ),
    device: str | None = typer.Option(None, help="Device [default: cuda if available, else cpu]"),
    overwrite: bool = typer.Option(False, help="Replace decoded files that already exist"),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)
    report = run_or_exit(
        lambda: decode_latents(
            latents_dir,
            output_dir,
            model_path=model_path,
            video_vae_path=video_vae_path,
            audio_vae_path=audio_vae_path,
            vae_tiling=vae_tiling,
            seed=seed,
            with_audio=with_audio,
            audio_latents_dir=audio_latents_dir,
            audio_output_dir=audio_output_dir,
            device=device,
            overwrite=overwrite,
        )
    )
    report.print()


if __name__ == "__main__":
    app()
