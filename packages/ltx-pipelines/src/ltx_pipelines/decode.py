"""Decode saved latents into the video and sidecar their run would have written: `python -m ltx_pipelines.decode`.

A run saves its denoised latents in `<output stem>.latents.safetensors` before decoding them; they stay
when decoding or writing fails or the run is interrupted (and on success with `--save-latents`). This
finishes such a run through the same decode step the pipelines use: it decodes the latents with
the video VAE, audio VAE and vocoder of the model files the run used (recorded in the file), with the
run's tiling, dtype and decoder noise, so the frames are the ones the uninterrupted run would have written.

Only those decoders are read. After the model files moved, name them again: `--checkpoint-path` (a single
file or a diffusers folder holding them) and/or the component files `--video-vae-path` and
`--audio-vae-path` (LTX-2.5's files; each replaces that decoder of the recorded files or of the checkpoint).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_core.command_parser import CommandParser
from ltx_core.loader.components import COMPONENT_FLAGS, COMPONENT_SECTIONS, Component, Layout
from ltx_core.model.video_vae.tiling_config import TilingConfig
from ltx_pipelines.cli.command import LOG_LEVELS, configure_logging, gc_skips_loaded_modules, run_reporting_errors
from ltx_pipelines.cli.runtime_flags import DTYPE_CHOICES, add_tiling_args, tiling_from_args
from ltx_pipelines.io.atomic_files import check_output_path, sidecar_path

if TYPE_CHECKING:
    from ltx_core.loader import ModelFiles

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m ltx_pipelines.decode",
        description=__doc__.splitlines()[0] if __doc__ else None,
        add_help=False,
    )
    files = parser.add_argument_group("files")
    files.add_argument("--latents", required=True, help="The .latents.safetensors file a run saved.")
    files.add_argument(
        "--output-path", required=True, help="Where to write the video (.mp4); the sidecar goes beside it."
    )
    files.add_argument(
        "--checkpoint-path",
        default=None,
        help="A single-file LTX checkpoint or a diffusers model folder holding the video VAE, audio VAE and "
        "vocoder, a path or hf:// file or folder (default: the model files the run used).",
    )
    for component, what in _DECODER_FILES.items():
        files.add_argument(
            COMPONENT_FLAGS[component],
            default=None,
            help=f"The {what} file (e.g. LTX-2.5's {_EXAMPLES[component]}), a path or hf:// file; replaces the "
            "recorded one (or --checkpoint-path's).",
        )
    files.add_argument("--overwrite", action="store_true", help="Replace the output video and sidecar if they exist.")
    device = parser.add_argument_group("device")
    device.add_argument("--device", default=None, help="cpu, cuda, cuda:N or mps (default: CUDA, then MPS, then CPU).")
    device.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default=None,
        help="Decoder precision (default: the run's, for the same frames).",
    )
    add_tiling_args(parser, unset_means="the run's own layout, for the same frames")
    general = parser.add_argument_group("general")
    general.add_argument("-h", "--help", action="help", help="Show this help.")
    general.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO", help="Logging verbosity.")
    return parser


_DECODER_FILES: dict[Component, str] = {
    Component.VIDEO_VAE: "video VAE",
    Component.AUDIO_VAE: "audio VAE + vocoder",
}
_EXAMPLES = {
    Component.VIDEO_VAE: "ltx-2.5-video-vae-bf16.safetensors",
    Component.AUDIO_VAE: "ltx-2.5-audio-vae-bf16.safetensors",
}
_MOVED_HINT = (
    "recorded in the latents file; if the model files moved, pass --video-vae-path and --audio-vae-path "
    "(or --checkpoint-path: a single file or diffusers folder)"
)


def _check_sections(files: ModelFiles, flags: dict[Component, str]) -> None:
    """Each decoder's source describes it: its config has the sections the decoder is built from (a VAE
    file given as the checkpoint, or the transformer given as the VAE, is named here, before loading)."""
    from ltx_core.loader import CheckpointError

    for component, flag in flags.items():
        source = files.source(component)
        config = source.read_metadata().get("config")
        present = sorted(k for k, v in config.items() if isinstance(v, dict)) if isinstance(config, dict) else []
        missing = [section for section in COMPONENT_SECTIONS[component] if section not in present]
        if missing:
            raise CheckpointError(
                f"{flag}: {source.config_origin} cannot provide the {_DECODER_FILES[component]}: its config has no "
                f"{' / '.join(repr(m) for m in missing)} section (sections present: {present or 'none'}); "
                f"{COMPONENT_FLAGS[component]} takes the {_DECODER_FILES[component]} file "
                f"(e.g. {_EXAMPLES[component]})"
            )


def decoding_files(
    metadata: dict[str, str], checkpoint: str | None, given: dict[Component, str], *, audio: bool
) -> ModelFiles:
    """The files the decoders are read from: the user's component files (`given`), else `checkpoint` (a
    single file or a diffusers folder), else the model files the latents record; only the decoders
    (`audio`: the latents hold an audio latent to decode) are looked for, so a moved transformer or text
    encoder does not matter. Raises `CheckpointError` / `HfPathError` naming the flag."""
    from ltx_core.loader import CheckpointError, ModelFiles
    from ltx_core.loader.model_files import model_files_of, names_a_model_folder
    from ltx_pipelines.cli.model_resolution import resolve_model_path

    needed = [Component.VIDEO_VAE, *([Component.AUDIO_VAE] if audio else [])]
    local = {}
    for component, value in given.items():
        local[component] = resolve_model_path(value)
    rest = [c for c in needed if c not in local]
    base = ModelFiles(Layout.SPLIT, ())
    if rest and checkpoint is not None:
        folder = names_a_model_folder(checkpoint)
        base = model_files_of(resolve_model_path(checkpoint, folder=folder)).subset(*rest)
        flags = dict.fromkeys(rest, "--checkpoint-path")
    elif rest:
        recorded_files = json.loads(metadata.get("checkpoint_files", "null"))
        try:
            if recorded_files is not None:
                base = ModelFiles.from_dict(recorded_files, only=rest)
            elif metadata.get("checkpoint"):
                base = model_files_of(Path(metadata["checkpoint"])).subset(*rest)
            else:
                raise CheckpointError("the latents file records no model files")
        except CheckpointError as e:
            raise CheckpointError(f"{e} ({_MOVED_HINT})") from None
        flags = {c: f"the recorded {_DECODER_FILES[c]}" for c in rest}
    else:
        flags = {}
    files = base.replacing(local)
    try:
        files.require(*needed, purpose="decoding these latents")
    except CheckpointError as e:
        where = "--checkpoint-path" if checkpoint is not None else _MOVED_HINT
        raise CheckpointError(f"{e} ({where})") from None
    _check_sections(files, {**flags, **{c: COMPONENT_FLAGS[c] for c in local}})
    return files


def _recorded_tiling(metadata: dict[str, str]) -> TilingConfig | None:
    spec = json.loads(metadata.get("tiling", "null"))
    return None if spec is None else TilingConfig.from_dict(spec)


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Any, ...]:
    """The latents file, the output path, the decoder files, device, dtype and tiling, each checked before
    anything is loaded (a bad one exits with code 2, like the pipelines' validation)."""
    from ltx_core.devices import parse_dtype, resolve_device
    from ltx_core.loader import CheckpointError
    from ltx_pipelines.cli.model_resolution import HfPathError
    from ltx_pipelines.engine.generation import LatentsFileError, decodes_audio, read_latents_header

    latents_path = Path(args.latents).expanduser()
    try:
        metadata, keys = read_latents_header(latents_path)
    except LatentsFileError as e:
        parser.error(f"--latents: {e}")
    output = Path(args.output_path).expanduser()
    if output.suffix.lower() != ".mp4":
        parser.error(f"--output-path {args.output_path!r}: the file name must end in .mp4")
    try:
        output = check_output_path(output, overwrite=args.overwrite)
        check_output_path(sidecar_path(output), overwrite=args.overwrite)
    except OSError as e:
        parser.error(f"--output-path: {e}")
    given = {c: getattr(args, COMPONENT_FLAGS[c].lstrip("-").replace("-", "_")) for c in _DECODER_FILES}
    try:
        checkpoint = decoding_files(
            metadata,
            args.checkpoint_path,
            {c: v for c, v in given.items() if v is not None},
            audio=decodes_audio(keys),
        )
    except (HfPathError, CheckpointError) as e:
        parser.error(str(e))
    try:
        device = resolve_device(args.device)
    except (RuntimeError, ValueError) as e:
        parser.error(f"--device {args.device!r}: {e}")
    dtype = parse_dtype(args.dtype) if args.dtype else None
    recorded = _recorded_tiling(metadata)
    try:
        tiling = tiling_from_args(args, height=None, width=None, base=recorded)
    except ValueError as e:
        parser.error(str(e))
    return latents_path, output, checkpoint, device, dtype, tiling


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    configure_logging(args.log_level)
    # Imported once the arguments parse: `--help` and a usage error need none of it.
    from ltx_pipelines.engine.generation import decode_video_generation, load_latents, write_generation

    latents_path, output, checkpoint, device, dtype, tiling = _checked(parser, args)

    def body() -> None:
        loaded = load_latents(latents_path, checkpoint=checkpoint, device=device, dtype=dtype, tiling=tiling)
        with gc_skips_loaded_modules():
            decoded = decode_video_generation(loaded.final)
        # The run's own parameters, except where this video went; the latents stay in their file.
        parameters = {**loaded.record.parameters, "output_path": str(output)}
        video, sidecar = write_generation(
            decoded,
            output,
            parameters=parameters,
            model_files=loaded.record.model_files,
            overwrite=args.overwrite,
            checked_at_start=True,
        )
        logger.info("decoded %s into %s and %s", latents_path, video, sidecar.name)

    return run_reporting_errors(body, debug=args.log_level == "DEBUG", output_path=output)


if __name__ == "__main__":
    sys.exit(main())
