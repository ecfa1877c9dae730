"""The output flag group: where the result goes and what is kept (`--output-path`, `--overwrite`,
`--no-audio-output`, `--save-latents`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.engine.defaults import PipelineDefaults
from ltx_pipelines.io.atomic_files import check_output_path, sidecar_path


@dataclass(frozen=True)
class OutputChoice:
    path: Path
    given: str
    """`--output-path` as typed (the sidecar records it)."""
    overwrite: bool
    save_latents: bool
    audio_output: bool
    """Whether the written video carries the audio stream (`--no-audio-output` leaves it out)."""


@dataclass(frozen=True)
class OutputFlags(FlagGroup[OutputChoice]):
    """`suffixes`: what `--output-path` may end in (audio-only pipelines write `.wav`). The sidecar beside
    the output is protected like the output itself."""

    suffixes: tuple[str, ...] = (".mp4",)

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("output")
        group.add_argument(
            "--output-path",
            type=str,
            required=True,
            help="Where to write the result (.mp4; .wav for audio-only pipelines); its folder is created.",
        )
        group.add_argument(
            "--overwrite", action="store_true", help="Replace the output file if it exists (refused otherwise)."
        )
        group.add_argument(
            "--no-audio-output",
            action="store_true",
            help="Write the video without its audio stream (the audio is still generated alongside the video).",
        )
        group.add_argument(
            "--save-latents",
            action="store_true",
            help=(
                "Keep the denoised latents beside the video (<output stem>.latents.safetensors) even when the "
                "run succeeds; they are always kept when decoding or encoding fails. Decode them again with "
                "python -m ltx_pipelines.decode --latents FILE --output-path OUT."
            ),
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> OutputChoice:
        raw = args.output_path
        path = Path(raw).expanduser()
        if path.suffix.lower() not in self.suffixes:
            raise FlagError(f"--output-path {raw!r}: the file name must end in {' or '.join(self.suffixes)}")
        if args.no_audio_output and path.suffix.lower() == ".wav":
            raise FlagError(f"--no-audio-output: --output-path {raw!r} is an audio file; the flag applies to videos")
        overwrite = bool(args.overwrite)
        try:
            path = check_output_path(path, overwrite=overwrite)
            check_output_path(sidecar_path(path), overwrite=overwrite)
        except FileExistsError as e:
            raise FlagError(f"--output-path: {e}") from None
        except OSError as e:
            raise FlagError(f"--output-path {raw!r}: {e}") from None
        return OutputChoice(
            path=path,
            given=raw,
            overwrite=overwrite,
            save_latents=bool(args.save_latents),
            audio_output=not args.no_audio_output,
        )

    def record(self, value: OutputChoice) -> dict[str, Any]:
        return {
            "output_path": value.given,
            "overwrite": value.overwrite,
            "no_audio_output": not value.audio_output,
            "save_latents": value.save_latents,
        }
