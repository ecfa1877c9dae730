"""The guidance flag group of the pipelines with a guided (full-checkpoint) stage: `--negative-prompt`,
`--num-inference-steps`, the multi-modal guidance of each modality and `--max-batch-size`."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, replace
from typing import Any

from ltx_core.components.guider_params import MultiModalGuiderParams
from ltx_pipelines.cli.arg_types import positive_int
from ltx_pipelines.cli.flag_group import (
    Flag,
    FlagError,
    FlagGroup,
    FlagSection,
    ReadContext,
    Reading,
    add_run_default,
    finite,
)
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.engine.model_versions import DEFAULT_MAX_BATCH_SIZE, DEFAULT_NEGATIVE_PROMPT, PipelineDefaults

logger = logging.getLogger(__name__)

_CROSS_FLAGS = {"video": "--a2v-guidance-scale", "audio": "--v2a-guidance-scale"}
_CROSS_HELP = {
    "video": "Video guidance away from the audio-isolated prediction",
    "audio": "Audio guidance away from the video-isolated prediction",
}


@dataclass(frozen=True)
class _ModalityFlag:
    """One guidance flag of each guided modality, as data: `--<modality>-<suffix>` (the cross-modal one has a name
    per modality, `_CROSS_FLAGS`), the `MultiModalGuiderParams` field it sets (its default: the model version's)
    and the help before that default (`{label}`: Video/Audio, `{modality}`, `{cross}`: `_CROSS_HELP`)."""

    suffix: str
    field: str
    text: str
    kind: type = float
    cross: bool = False
    many: bool = False
    """A list of values (the STG blocks)."""

    @property
    def options(self) -> dict[str, Any]:
        return {"nargs": "*", "metavar": "BLOCK"} if self.many else {}

    def flag(self, modality: str) -> str:
        return _CROSS_FLAGS[modality] if self.cross else f"--{modality}-{self.suffix}"


# In `--help` order; `_read_modality` checks each value.
_MODALITY_FLAGS = (
    _ModalityFlag("cfg-guidance-scale", "cfg_scale", "{label} classifier-free guidance scale; 1 disables it"),
    _ModalityFlag(
        "stg-guidance-scale", "stg_scale", "{label} STG (skipped self-attention) guidance scale; 0 disables it"
    ),
    _ModalityFlag(
        "rescale-scale",
        "rescale_scale",
        "{label} guidance rescale: how far the guided prediction's std is pulled back to the conditional one's, "
        "0 = off",
    ),
    _ModalityFlag("", "modality_scale", "{cross}; 1 disables it", cross=True),  # named by `_CROSS_FLAGS`
    _ModalityFlag(
        "skip-step",
        "skip_step",
        "{label} guidance runs only on steps where step %% (N + 1) == 0: 0 guides every step, 1 every other step",
        int,
    ),
    _ModalityFlag(
        "stg-blocks", "stg_blocks", "Transformer blocks whose {modality} self-attention STG skips", int, many=True
    ),
)


@dataclass(frozen=True)
class GuidanceChoice:
    negative_prompt: str
    num_inference_steps: int
    video: MultiModalGuiderParams | None
    audio: MultiModalGuiderParams | None
    video_blocks_given: bool = False
    """Whether the user chose the video STG blocks (defaults are fitted to a smaller model, not refused)."""
    audio_blocks_given: bool = False


@dataclass(frozen=True)
class GuidanceFlags(FlagGroup[GuidanceChoice]):
    """`video` / `audio`: which modalities are guided. `cross_modal=False` leaves out `--a2v-guidance-scale` /
    `--v2a-guidance-scale` (a single-modality pipeline has no other modality to guide away from)."""

    video: bool = True
    audio: bool = True
    cross_modal: bool = True

    def _modalities(self) -> list[str]:
        return [m for m, on in (("video", self.video), ("audio", self.audio)) if on]

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        steps = defaults.num_inference_steps
        sampling = parser.add_argument_group("sampling")
        add_run_default(sampling, "--num-inference-steps", int, "Denoising steps of the (first) stage", steps)
        group = parser.add_argument_group("guidance")
        group.add_argument(
            "--negative-prompt",
            type=str,
            default=DEFAULT_NEGATIVE_PROMPT,
            help="What to steer away from under classifier-free guidance (default: a list of common artefacts).",
        )
        for modality in self._modalities():
            self._add_modality(group, modality, getattr(defaults, f"{modality}_guidance"))

    def _modality_flags(self) -> tuple[_ModalityFlag, ...]:
        return tuple(spec for spec in _MODALITY_FLAGS if self.cross_modal or not spec.cross)

    def _add_modality(self, group: Any, modality: str, defaults: MultiModalGuiderParams) -> None:
        for spec in self._modality_flags():
            shown = getattr(defaults, spec.field)
            text = spec.text.format(label=modality.capitalize(), modality=modality, cross=_CROSS_HELP[modality])
            add_run_default(
                group, spec.flag(modality), spec.kind, text, list(shown) if spec.many else shown, **spec.options
            )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[GuidanceChoice]:
        defaults = context.defaults
        steps = defaults.num_inference_steps if args.num_inference_steps is None else args.num_inference_steps
        if steps < 1:
            raise FlagError(f"--num-inference-steps {steps} is not accepted: it must be at least 1")
        params: dict[str, MultiModalGuiderParams | None] = {"video": None, "audio": None}
        given: dict[str, bool] = {"video": False, "audio": False}
        for modality in self._modalities():
            params[modality] = self._read_modality(args, modality, getattr(defaults, f"{modality}_guidance"))
            given[modality] = getattr(args, f"{modality}_stg_blocks") is not None
        value = GuidanceChoice(
            negative_prompt=args.negative_prompt,
            num_inference_steps=int(steps),
            video=params["video"],
            audio=params["audio"],
            video_blocks_given=given["video"],
            audio_blocks_given=given["audio"],
        )
        # The STG blocks are checked against the transformer's depth once the model files are known.
        return self._reading(value, settle=True)

    def _read_modality(
        self, args: argparse.Namespace, modality: str, defaults: MultiModalGuiderParams
    ) -> MultiModalGuiderParams:
        def given(name: str, default: Any) -> Any:
            value = getattr(args, f"{modality}_{name}", None)
            return default if value is None else value

        skip = given("skip_step", defaults.skip_step)
        if skip < 0:
            raise FlagError(f"--{modality}-skip-step {skip} is not accepted: it must be >= 0 (0 guides every step)")
        blocks = tuple(int(b) for b in given("stg_blocks", defaults.stg_blocks))
        if any(b < 0 for b in blocks):
            raise FlagError(f"--{modality}-stg-blocks {list(blocks)}: block indices must be >= 0")
        stg_scale = finite(f"--{modality}-stg-guidance-scale", given("stg_guidance_scale", defaults.stg_scale))
        if stg_scale != 0 and not blocks:
            raise FlagError(
                f"--{modality}-stg-guidance-scale {stg_scale} needs at least one block in --{modality}-stg-blocks "
                f"(or pass --{modality}-stg-guidance-scale 0 to turn STG off)"
            )
        cross_flag = _CROSS_FLAGS[modality]
        cross = getattr(args, cross_flag.lstrip("-").replace("-", "_"), None) if self.cross_modal else None
        return MultiModalGuiderParams(
            cfg_scale=finite(f"--{modality}-cfg-guidance-scale", given("cfg_guidance_scale", defaults.cfg_scale)),
            stg_scale=stg_scale,
            rescale_scale=finite(f"--{modality}-rescale-scale", given("rescale_scale", defaults.rescale_scale)),
            # Without the cross-modal flag (audio-only pipelines) there is no other modality: 1 is off.
            modality_scale=finite(cross_flag, (defaults.modality_scale if cross is None else cross))
            if self.cross_modal
            else 1.0,
            skip_step=int(skip),
            stg_blocks=blocks,
        )

    def settle(self, value: GuidanceChoice, models: RunModels, context: ReadContext) -> Reading[GuidanceChoice]:
        """STG blocks must exist in the checkpoint's transformer (a missing block would silently turn STG into a
        no-op). Blocks the user did not choose (the defaults, made for the released models) and any block of a
        `--demo` run move to the model's last block instead of failing, so a command without STG flags runs on
        any checkpoint, the small demo model included."""
        layers = models.num_layers
        if layers is None:
            return self._reading(value)
        demo = models.demo
        changes: dict[str, MultiModalGuiderParams | None] = {}
        for modality in ("video", "audio"):
            params: MultiModalGuiderParams | None = getattr(value, modality)
            if params is None or not params.needs_perturbed:
                continue
            outside = [b for b in params.stg_blocks if b >= layers]
            if not outside:
                continue
            if demo or not getattr(value, f"{modality}_blocks_given"):
                fitted = tuple(sorted({min(b, layers - 1) for b in params.stg_blocks}))
                logger.warning(
                    "%s has %d transformer blocks: --%s-stg-blocks %s -> %s",
                    "demo model" if demo else "the model", layers, modality, list(params.stg_blocks), list(fitted),
                )  # fmt: skip
                changes[modality] = replace(params, stg_blocks=fitted)
                continue
            raise FlagError(
                f"--{modality}-stg-blocks {list(params.stg_blocks)}: block(s) {outside} do not exist; the checkpoint's "
                f"transformer has {layers} blocks (accepted: 0..{layers - 1})"
            )
        return self._reading(replace(value, **changes) if changes else value)

    def _reading(self, value: GuidanceChoice, *, settle: bool = False) -> Reading[GuidanceChoice]:
        recorded: dict[str, Any] = {
            "negative_prompt": value.negative_prompt,
            "num_inference_steps": value.num_inference_steps,
        }
        for modality in self._modalities():
            params: MultiModalGuiderParams = getattr(value, modality)
            for spec in self._modality_flags():
                given = getattr(params, spec.field)
                recorded[spec.flag(modality).lstrip("-").replace("-", "_")] = list(given) if spec.many else given
        # The one place this group's value becomes the pipelines' call (a `GuidanceRequest` once they take one);
        # a modality the pipeline does not guide is not passed (e.g. a2vid's audio is frozen).
        arguments: dict[str, Any] = {
            "negative_prompt": value.negative_prompt,
            "num_inference_steps": value.num_inference_steps,
        }
        for modality in self._modalities():
            arguments[f"{modality}_guidance"] = getattr(value, modality)
        # The negative prompt is encoded with the prompt: two prompts at once.
        return Reading(value, record=recorded, call_arguments=arguments, memory_inputs={"prompts": 2}, settle=settle)


class MaxBatchSizeFlags(FlagGroup[int]):
    """`--max-batch-size N`: how many guidance passes share one transformer call."""

    sections = (
        FlagSection(
            "guidance batching",
            (
                Flag(
                    "--max-batch-size",
                    {
                        "type": positive_int,
                        "default": DEFAULT_MAX_BATCH_SIZE,
                        "metavar": "N",
                        "help": "Guidance runs up to 4 transformer passes per step (conditional, negative prompt, "
                        "STG, modality isolation); they are batched N at a time. Larger N is faster and needs more "
                        f"memory (default: {DEFAULT_MAX_BATCH_SIZE}).",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[int]:
        value = int(args.max_batch_size)
        return Reading(value, record={"max_batch_size": value}, memory_inputs={"batch": value})
