"""Decode saved latents into the video and sidecar their run would have written: `python -m ltx_pipelines.decode`.

A run saves its denoised latents in `<output stem>.latents.safetensors` before decoding them; they stay
when decoding or writing fails or the run is interrupted (and on success with `--save-latents`). This
finishes such a run through the same decode step the pipelines use: it decodes the latents with
the VAE and vocoder of the checkpoint the run used (recorded in the file; `--checkpoint-path`
points elsewhere, e.g. after moving the models), with the run's tiling, dtype and decoder noise,
so the frames are the ones the uninterrupted run would have written.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ltx_core.loader import CheckpointError, ModelFiles
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_pipelines.cli.command import LOG_LEVELS, configure_logging, gc_skips_loaded_modules, run_reporting_errors
from ltx_pipelines.cli.hf_paths import HfPathError, resolve_model_path
from ltx_pipelines.cli.parser import CommandParser
from ltx_pipelines.cli.runtime_flags import DTYPE_CHOICES
from ltx_pipelines.cli.tiling_flags import add_tiling_args, tiling_from_args
from ltx_pipelines.engine.checkpoint_kind import check_checkpoint_kind
from ltx_pipelines.engine.decoding import decode_video_generation
from ltx_pipelines.engine.generation import write_generation
from ltx_pipelines.engine.latents_file import LatentsFileError, load_latents, read_latents_header
from ltx_pipelines.media.atomic_files import check_output_path, sidecar_path

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
        help="The LTX checkpoint with the VAE and vocoder, a path or hf:// file (default: the one the run used).",
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


def _recorded_tiling(metadata: dict[str, str]) -> TilingConfig | None:
    spec = json.loads(metadata.get("tiling", "null"))
    return None if spec is None else TilingConfig.from_dict(spec)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    configure_logging(args.log_level)

    # Checks before anything is loaded (exit code 2, like the pipelines' validation).
    latents_path = Path(args.latents).expanduser()
    try:
        metadata, _ = read_latents_header(latents_path)
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
    checkpoint_value = args.checkpoint_path or metadata.get("checkpoint")
    if not checkpoint_value:
        parser.error("--checkpoint-path is required: the latents file records no checkpoint")
    checkpoint: Path | ModelFiles
    try:
        if args.checkpoint_path is None and json.loads(metadata.get("checkpoint_files", "null")) is not None:
            # A run on component files (LTX-2.5): the recorded set, each file checked where it was.
            checkpoint = ModelFiles.from_dict(json.loads(metadata["checkpoint_files"]))
        else:
            checkpoint = resolve_model_path(checkpoint_value)
        check_checkpoint_kind(checkpoint, "ltx_checkpoint")
    except (HfPathError, CheckpointError) as e:
        hint = "" if args.checkpoint_path else " (recorded in the latents file; pass --checkpoint-path if it moved)"
        parser.error(f"--checkpoint-path: {e}{hint}")
    from ltx_core.devices import parse_dtype, resolve_device

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
