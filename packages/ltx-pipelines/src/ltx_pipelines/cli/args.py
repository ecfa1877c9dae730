"""The pipelines' shared command line: composable flag groups with the reference's names and defaults.

Each pipeline builds its parser from the groups it needs, parses, and calls `validate_args`
(re-exported here from `run_config`) before loading anything:

    defaults = defaults_from_argv(distilled=True)
    parser = make_parser("python -m ltx_pipelines.distilled", "Two-stage distilled text/image-to-video.")
    add_model_args(parser, distilled=True)
    add_two_stage_args(parser, distilled_lora=False)
    add_video_args(parser, defaults, two_stage=True)
    add_lora_args(parser)
    add_common_args(parser, defaults)
    config = validate_args(parser, parser.parse_args())

Model paths accept `hf://<org>/<repo>/<file>` (the Gemma folder `hf://<org>/<repo>`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec
from ltx_pipelines.cli.arg_types import finite_float, positive_int
from ltx_pipelines.cli.hf_paths import cached_hf_file, is_hf_path
from ltx_pipelines.cli.run_config import (
    RunConfig,
    ValidationRules,
    validate_args,
)
from ltx_pipelines.engine.defaults import (
    DEFAULT_LORA_STRENGTH,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_NEGATIVE_PROMPT,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
    LTX_2_3_DEFAULTS,
    PipelineDefaults,
    defaults_for_checkpoint,
    spatial_multiple,
)
from ltx_pipelines.engine.stages import ImageCondition

logger = logging.getLogger(__name__)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DTYPE_CHOICES = ("bfloat16", "float32")

__all__ = [
    "DTYPE_CHOICES",
    "LOG_LEVELS",
    "ImageAction",
    "LoraAction",
    "RunConfig",
    "ValidationRules",
    "add_common_args",
    "add_guidance_args",
    "add_hq_lora_strength_args",
    "add_lora_args",
    "add_max_batch_size_arg",
    "add_model_args",
    "add_sampling_args",
    "add_two_stage_args",
    "add_video_args",
    "configure_logging",
    "defaults_from_argv",
    "make_parser",
    "validate_args",
]


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows a variable-length flag's real argument list (`PATH FRAME_IDX STRENGTH [CRF]`)."""

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        shown = getattr(action, "display_metavar", None)
        return shown if shown is not None else super()._format_args(action, default_metavar)


def make_parser(prog: str | None = None, description: str | None = None) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=description, formatter_class=_HelpFormatter)


def _number(action: argparse.Action, name: str, raw: str, kind: type) -> Any:
    try:
        return kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentError(action, f"{name} must be {what}; got {raw!r}") from None


class _RepeatedValuesAction(argparse.Action):
    """A repeatable flag with several values: each use appends the item `parse_values` makes of them."""

    def parse_values(self, values: list[str]) -> Any:
        raise NotImplementedError

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        item = self.parse_values(values)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), item])


class ImageAction(_RepeatedValuesAction):
    """`--image PATH FRAME_IDX STRENGTH [CRF]`, repeatable; appends an ImageCondition."""

    display_metavar = "PATH FRAME_IDX STRENGTH [CRF]"

    def parse_values(self, values: list[str]) -> ImageCondition:
        if len(values) not in (3, 4):
            raise argparse.ArgumentError(
                self, f"takes 3 or 4 values (PATH FRAME_IDX STRENGTH [CRF]); got {len(values)}: {values}"
            )
        return ImageCondition(
            path=Path(values[0]).expanduser(),
            frame_idx=_number(self, "FRAME_IDX", values[1], int),
            strength=_number(self, "STRENGTH", values[2], float),
            crf=_number(self, "CRF", values[3], int) if len(values) == 4 else None,
        )


class LoraAction(_RepeatedValuesAction):
    """`--lora PATH [STRENGTH]`, repeatable; appends a LoraSpec (strength defaults to 1.0)."""

    display_metavar = "PATH [STRENGTH]"

    def parse_values(self, values: list[str]) -> LoraSpec:
        if len(values) not in (1, 2):
            raise argparse.ArgumentError(
                self, f"takes PATH and an optional STRENGTH; got {len(values)} values: {values}"
            )
        strength = _number(self, "STRENGTH", values[1], float) if len(values) == 2 else DEFAULT_LORA_STRENGTH
        path = values[0] if is_hf_path(values[0]) else Path(values[0]).expanduser()
        return LoraSpec(path, strength)


def add_model_args(parser: argparse.ArgumentParser, *, distilled: bool) -> argparse.ArgumentParser:
    """The LTX checkpoint (`--checkpoint-path`, or `--distilled-checkpoint-path`) and `--gemma-root`."""
    group = parser.add_argument_group("model files")
    if distilled:
        group.add_argument(
            "--distilled-checkpoint-path",
            type=str,
            default=None,
            help="The LTX-2 distilled single-file checkpoint (.safetensors), a path or hf://<org>/<repo>/<file>.",
        )
    else:
        group.add_argument(
            "--checkpoint-path",
            type=str,
            default=None,
            help="The LTX-2 single-file checkpoint (.safetensors), a path or hf://<org>/<repo>/<file>.",
        )
    group.add_argument(
        "--gemma-root",
        type=str,
        default=None,
        help="The Gemma 3 text encoder folder (Hugging Face layout), a path or hf://<org>/<repo>.",
    )
    return parser


def add_two_stage_args(parser: argparse.ArgumentParser, *, distilled_lora: bool) -> argparse.ArgumentParser:
    """`--spatial-upsampler-path`, and `--distilled-lora` for pipelines whose stage 2 fuses it."""
    group = parser.add_argument_group("two-stage models")
    group.add_argument(
        "--spatial-upsampler-path",
        type=str,
        default=None,
        help="The latent x2 spatial upsampler between the stages (.safetensors), a path or hf:// file.",
    )
    if distilled_lora:
        group.add_argument(
            "--distilled-lora",
            dest="distilled_lora",
            action=LoraAction,
            nargs="+",
            metavar=("PATH", "STRENGTH"),
            default=None,
            help=(
                "The distilled LoRA fused for the second (refinement) stage, with an optional strength "
                f"(default {DEFAULT_LORA_STRENGTH}). Example: --distilled-lora distilled-lora.safetensors 0.8"
            ),
        )
    return parser


def add_lora_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--lora PATH [STRENGTH]`, repeatable (LoRAs fused into the transformer), and
    `--lora-fusion-precision` (how every LoRA of the run, the distilled one included, is fused)."""
    group = parser.add_argument_group("LoRAs")
    group.add_argument(
        "--lora",
        dest="lora",
        action=LoraAction,
        nargs="+",
        metavar=("PATH", "STRENGTH"),
        default=[],
        help=(
            f"A LoRA to fuse into the transformer, with an optional strength (default {DEFAULT_LORA_STRENGTH}); "
            "repeatable. Example: --lora style.safetensors 0.8 --lora hf://org/repo/other.safetensors"
        ),
    )
    group.add_argument(
        "--lora-fusion-precision",
        choices=[p.value for p in LoraFusionPrecision],
        default=DEFAULT_LORA_FUSION.value,
        help=(
            "How LoRA updates are fused into the weights. weight-dtype: rounded in the dtype the checkpoint "
            "stores them in (bfloat16), as the reference implementation does - its outputs are reproduced. "
            "float32: accumulated in float32 without those roundings (slightly different results). "
            f"(default: {DEFAULT_LORA_FUSION.value})"
        ),
    )
    return parser


def add_common_args(
    parser: argparse.ArgumentParser, defaults: PipelineDefaults = LTX_2_3_DEFAULTS
) -> argparse.ArgumentParser:
    """Prompt, output, seed and run settings every pipeline has."""
    group = parser.add_argument_group("run")
    group.add_argument("--prompt", type=str, required=True, help="Text describing the video (and audio) to generate.")
    group.add_argument(
        "--output-path",
        type=str,
        required=True,
        help="Where to write the result (.mp4; .wav for audio-only pipelines); its folder is created.",
    )
    group.add_argument(
        "--seed",
        type=int,
        default=defaults.seed,
        help=f"Random seed; the same seed gives the same result (default: {defaults.seed}).",
    )
    group.add_argument(
        "--enhance-prompt",
        action="store_true",
        help="Rewrite the prompt with the Gemma model into a detailed description before encoding it.",
    )
    group.add_argument(
        "--device",
        type=str,
        default=None,
        help="Torch device: cpu, cuda, cuda:N or mps (default: CUDA, then MPS, then CPU).",
    )
    group.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default=defaults.dtype,
        help=f"Precision of the model weights and activations (default: {defaults.dtype}).",
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
            "Keep the denoised latents beside the video (<output stem>.latents.safetensors) even when the run "
            "succeeds; they are always kept when decoding or encoding fails. Decode them again with "
            "python -m ltx_pipelines.decode --latents FILE --output-path OUT."
        ),
    )
    group.add_argument(
        "--demo",
        action="store_true",
        help="Run the pipeline's small demo configuration; model paths become optional.",
    )
    group.add_argument(
        "--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO", help="Logging verbosity (default: INFO)."
    )
    return parser


def add_video_args(
    parser: argparse.ArgumentParser, defaults: PipelineDefaults = LTX_2_3_DEFAULTS, *, two_stage: bool
) -> argparse.ArgumentParser:
    """Output size, length, frame rate and image conditionings."""
    group = parser.add_argument_group("video")
    multiple = spatial_multiple(two_stage)
    height = defaults.two_stage_height if two_stage else defaults.height
    width = defaults.two_stage_width if two_stage else defaults.width
    group.add_argument(
        "--height",
        type=int,
        default=height,
        help=f"Video height in pixels, a multiple of {multiple} (default: {height}).",
    )
    group.add_argument(
        "--width", type=int, default=width, help=f"Video width in pixels, a multiple of {multiple} (default: {width})."
    )
    group.add_argument(
        "--num-frames",
        type=int,
        default=defaults.num_frames,
        help=f"Number of frames, 8k+1 (1, 9, ..., 121, ...) (default: {defaults.num_frames}).",
    )
    group.add_argument(
        "--frame-rate",
        type=float,
        default=defaults.frame_rate,
        help=f"Frames per second of the video, e.g. 24, 25, 30 or 23.976 (default: {defaults.frame_rate:g}).",
    )
    group.add_argument(
        "--image",
        dest="images",
        action=ImageAction,
        nargs="+",
        metavar="ARG",
        default=[],
        help=(
            "Condition on an image: PATH FRAME_IDX STRENGTH [CRF]; repeatable. FRAME_IDX is the output frame "
            "(0 = first), STRENGTH in [0, 1] (1 keeps the image), CRF in 0..51 the H.264 re-compression "
            "applied first (0 = none; default: the model generation's value, 33 up to LTX-2.3, 18 from 2.4). "
            "Example: --image first.jpg 0 1.0 --image last.png 120 0.8"
        ),
    )
    return parser


def add_sampling_args(
    parser: argparse.ArgumentParser, defaults: PipelineDefaults = LTX_2_3_DEFAULTS
) -> argparse.ArgumentParser:
    """`--num-inference-steps` (pipelines with a full, non-distilled first stage)."""
    group = parser.add_argument_group("sampling")
    group.add_argument(
        "--num-inference-steps",
        type=int,
        default=defaults.num_inference_steps,
        help=f"Denoising steps of the (first) stage (default: {defaults.num_inference_steps}).",
    )
    return parser


def _add_modality_guidance(
    group: Any,
    modality: str,
    cross_flag: str,
    cross_help: str,
    defaults: MultiModalGuiderParams,
    *,
    cross_modal: bool = True,
) -> None:
    label = modality.capitalize()
    group.add_argument(
        f"--{modality}-cfg-guidance-scale",
        type=float,
        default=defaults.cfg_scale,
        help=f"{label} classifier-free guidance scale; 1 disables it (default: {defaults.cfg_scale}).",
    )
    group.add_argument(
        f"--{modality}-stg-guidance-scale",
        type=float,
        default=defaults.stg_scale,
        help=f"{label} STG (skipped self-attention) guidance scale; 0 disables it (default: {defaults.stg_scale}).",
    )
    group.add_argument(
        f"--{modality}-rescale-scale",
        type=float,
        default=defaults.rescale_scale,
        help=(
            f"{label} guidance rescale: how far the guided prediction's std is pulled back to the "
            f"conditional one's, 0 = off (default: {defaults.rescale_scale})."
        ),
    )
    if cross_modal:
        group.add_argument(
            cross_flag,
            type=float,
            default=defaults.modality_scale,
            help=f"{cross_help}; 1 disables it (default: {defaults.modality_scale}).",
        )
    group.add_argument(
        f"--{modality}-skip-step",
        type=int,
        default=defaults.skip_step,
        help=(
            f"{label} guidance runs only on steps where step %% (N + 1) == 0: 0 guides every step, "
            f"1 every other step (default: {defaults.skip_step})."
        ),
    )
    group.add_argument(
        f"--{modality}-stg-blocks",
        type=int,
        nargs="*",
        default=list(defaults.stg_blocks),
        metavar="BLOCK",
        help=f"Transformer blocks whose {modality} self-attention STG skips (default: {list(defaults.stg_blocks)}).",
    )


def add_guidance_args(
    parser: argparse.ArgumentParser,
    defaults: PipelineDefaults = LTX_2_3_DEFAULTS,
    *,
    video: bool = True,
    audio: bool = True,
    cross_modal: bool = True,
) -> argparse.ArgumentParser:
    """`--negative-prompt` and the multi-modal guidance scales (pipelines with a guided stage).
    `cross_modal=False` leaves out `--a2v-guidance-scale` / `--v2a-guidance-scale` (a single-modality
    pipeline has no other modality to guide away from)."""
    group = parser.add_argument_group("guidance")
    group.add_argument(
        "--negative-prompt",
        type=str,
        default=DEFAULT_NEGATIVE_PROMPT,
        help="What to steer away from under classifier-free guidance (default: a list of common artefacts).",
    )
    if video:
        _add_modality_guidance(
            group,
            "video",
            "--a2v-guidance-scale",
            "Video guidance away from the audio-isolated prediction",
            defaults.video_guidance,
            cross_modal=cross_modal,
        )
    if audio:
        _add_modality_guidance(
            group,
            "audio",
            "--v2a-guidance-scale",
            "Audio guidance away from the video-isolated prediction",
            defaults.audio_guidance,
            cross_modal=cross_modal,
        )
    return parser


def add_max_batch_size_arg(
    parser: argparse.ArgumentParser, defaults: PipelineDefaults | None = None
) -> argparse.ArgumentParser:
    """`--max-batch-size N` (guided pipelines): how many guidance passes share one transformer call."""
    parser.add_argument(
        "--max-batch-size",
        type=positive_int,
        default=DEFAULT_MAX_BATCH_SIZE,
        metavar="N",
        help=(
            "Guidance runs up to 4 transformer passes per step (conditional, negative prompt, STG, modality "
            "isolation); they are batched N at a time. Larger N is faster and needs more memory "
            f"(default: {DEFAULT_MAX_BATCH_SIZE})."
        ),
    )
    return parser


def add_hq_lora_strength_args(
    parser: argparse.ArgumentParser, defaults: PipelineDefaults | None = None
) -> argparse.ArgumentParser:
    """The HQ pipeline's per-stage strengths of the distilled LoRA (fused into both stages)."""
    group = parser.add_argument_group("distilled LoRA strengths (HQ)")
    for stage, default in ((1, HQ_DISTILLED_LORA_STRENGTH_STAGE_1), (2, HQ_DISTILLED_LORA_STRENGTH_STAGE_2)):
        group.add_argument(
            f"--distilled-lora-strength-stage-{stage}",
            type=finite_float,
            default=default,
            metavar="STRENGTH",
            help=(
                f"Strength of the distilled LoRA fused into the stage-{stage} transformer; replaces the "
                f"STRENGTH of --distilled-lora (default: {default})."
            ),
        )
    return parser


def _help_requested(argv: Sequence[str]) -> bool:
    return "-h" in argv or "--help" in argv


def defaults_from_argv(argv: Sequence[str] | None = None, *, distilled: bool = False) -> PipelineDefaults:
    """The defaults of the model generation named by the checkpoint flag on the command line.

    Reads only the checkpoint's header (an hf:// checkpoint only if already cached); `--help`, a
    missing or unreadable checkpoint gives the LTX-2.3 defaults.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if _help_requested(argv):
        return LTX_2_3_DEFAULTS
    flag = "--distilled-checkpoint-path" if distilled else "--checkpoint-path"
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument(flag, dest="checkpoint", default=None)
    known, _ = pre.parse_known_args(argv)
    value = known.checkpoint
    if value is None:
        return LTX_2_3_DEFAULTS
    if is_hf_path(value):
        try:
            cached = cached_hf_file(value)
        except ValueError:
            cached = None
        if cached is None:
            logger.info("%s is not cached yet; using LTX-2.3 defaults for the command line", value)
            return LTX_2_3_DEFAULTS
        return defaults_for_checkpoint(cached)
    path = Path(value).expanduser()
    return defaults_for_checkpoint(path) if path.is_file() else LTX_2_3_DEFAULTS


def configure_logging(level: str) -> None:
    """Root logging at `level` (from `--log-level`), with timestamps; libraries only use loggers."""
    logging.basicConfig(level=getattr(logging, level.upper()), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
