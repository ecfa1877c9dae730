"""`python -m ltx_trainer.process_dataset DATASET`: captions, latents, references, masks in one run.

Columns are recognised by name: video (legacy media_path), audio, caption, reference_video (legacy
ref_media_path), reference_audio, video_mask, audio_mask. Outputs go to `<dataset dir>/.precomputed/`.
Under `accelerate launch` each process takes its own shard of the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any

import typer

from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import exit_if_nothing_done, run_or_exit
from ltx_trainer.preprocessing.buckets import parse_durations
from ltx_trainer.preprocessing.media import CROP_MODES
from ltx_trainer.preprocessing.plan import PreprocessSettings, parse_optional_buckets, positive_factor
from ltx_trainer.preprocessing.run import preprocess_dataset

app = new_app(__doc__.splitlines()[0].split(": ", 1)[1])


# How a command-line option becomes its `PreprocessSettings` field: options named like a field are copied
# as given; these are renamed and/or parsed (in the settings' field order, so the first bad value is named).
_OPTION_OF_FIELD = {"crop_mode": "reshape_mode"}
_PARSE_FIELD: dict[str, Callable[[Any], Any]] = {
    "resolution_buckets": parse_optional_buckets,
    "audio_durations": lambda text: tuple(parse_durations(text)) if text else (),
    "reference_downscale_factor": partial(positive_factor, "--reference-downscale-factor"),
    "reference_temporal_scale_factor": partial(positive_factor, "--reference-temporal-scale-factor"),
}


def _settings(options: Mapping[str, Any]) -> PreprocessSettings:
    """The run's settings from the command's parameter values by name."""
    if options["reshape_mode"] not in CROP_MODES:
        raise typer.BadParameter(f"--reshape-mode {options['reshape_mode']!r}; accepted: {', '.join(CROP_MODES)}")
    values = {}
    for f in fields(PreprocessSettings):
        value = options[_OPTION_OF_FIELD.get(f.name, f.name)]
        values[f.name] = _PARSE_FIELD[f.name](value) if f.name in _PARSE_FIELD else value
    return PreprocessSettings(**values)


@app.command()
def main(
    dataset: Path = typer.Argument(..., help="Metadata file (.csv, .json or .jsonl); media paths relative to it"),
    model_path: Path = typer.Option(
        ..., help="LTX-2 / 2.3 single-file checkpoint, or the LTX-2.5 transformer file (.safetensors)"
    ),
    text_encoder_path: Path = typer.Option(..., help="Gemma 3 folder, or the LTX-2.5 packed Gemma 4 file"),
    resolution_buckets: str | None = typer.Option(
        None, help="Buckets 'WxHxF;...' (W, H multiples of 32, F = 8k+1); required with a video column"
    ),
    video_vae_path: Path | None = typer.Option(None, help="Video VAE file when not in --model-path (LTX-2.5)"),
    audio_vae_path: Path | None = typer.Option(None, help="Audio VAE + vocoder file when not in --model-path"),
    output_dir: Path | None = typer.Option(None, help="Output folder [default: <dataset dir>/.precomputed]"),
    caption_column: str | None = typer.Option(None, help="Column to use as 'caption' [default: auto-detect]"),
    video_column: str | None = typer.Option(None, help="Column to use as 'video' [default: video or media_path]"),
    batch_size: int = typer.Option(1, help="Captions encoded per Gemma forward"),
    device: str | None = typer.Option(None, help="Device, e.g. cuda, cuda:1, cpu [default: cuda if available]"),
    vae_tiling: bool = typer.Option(False, help="Encode/decode in 512-pixel tiles (less memory)"),
    reshape_mode: str = typer.Option("center", help=f"How frames are cropped to the bucket: {'|'.join(CROP_MODES)}"),
    seed: int = typer.Option(0, help="Seed for random crops"),
    lora_trigger: str | None = typer.Option(None, help="Word prepended to every caption"),
    remove_llm_prefixes: bool = typer.Option(False, help="Strip 'This video shows', 'Caption:' ... from captions"),
    skip_audio: bool = typer.Option(False, help="Do not encode the audio tracks of videos"),
    audio_durations: str | None = typer.Option(
        None, help="Duration buckets in seconds for audio-only rows, e.g. '2;4;8'"
    ),
    reference_downscale_factor: int = typer.Option(1, help="Reference videos at 1/N of the target's width and height"),
    reference_temporal_scale_factor: int = typer.Option(
        1, help="Reference videos keep frame 0 then every N-th frame (F_ref = (F-1)/N + 1)"
    ),
    decode: bool = typer.Option(False, help="Also write decoded previews to .precomputed/decoded_videos"),
    overwrite: bool = typer.Option(False, help="Recompute outputs that already exist (after changing settings)"),
    load_text_encoder_in_8bit: bool = typer.Option(
        False, help="8-bit Gemma (bitsandbytes LLM.int8(), about half the memory); needs CUDA and bitsandbytes"
    ),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    options = dict(locals())  # every parameter by name, as typer converted it (Path objects, ints, ...)
    configure_logging(verbose)
    report = run_or_exit(lambda: preprocess_dataset(dataset, _settings(options)))
    report.print()
    exit_if_nothing_done(report, "every sample", "fix the inputs (the reasons are in the table above) and run again")


if __name__ == "__main__":
    app()
