"""The released model versions a pipeline runs on, as its command line declares them (`ModelFlags.model_versions`)
and README's pipeline table names them: "2" (LTX-2 19B), "2.3" (LTX-2.3 22B), "2.5" (LTX-2.5, one file per
component), and their default run parameters, as the reference CLIs use them.

A checkpoint says which one it is in its `model_version` metadata (LTX-2 files carry none); its `model_version`
metadata picks the preset: LTX-2.3 changed the step count and the STG block, LTX-2.4 the CRF that image
conditionings are re-compressed at. The HQ preset is fixed (it overrides every knob that differs between
generations).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from ltx_core.components.guider_params import MultiModalGuiderParams

if TYPE_CHECKING:
    from ltx_core.loader.model_files import ModelSource

logger = logging.getLogger(__name__)


RELEASED_MODEL_VERSIONS: tuple[str, ...] = ("2", "2.3", "2.5")


DEFAULT_LORA_STRENGTH = 1.0


# The model families a demo set exists for (`ltx_pipelines.demo`). LTX-2.3 stays the default: its single file +
# Gemma 3 folder is what `--demo` has always built; `ltx-2.5` is the split-file set.
DEMO_FAMILIES = ("ltx-2.3", "ltx-2.5")


DEFAULT_DEMO_FAMILY = "ltx-2.3"


# The model version the LTX-2.5 demo set declares (its defaults are that version's). Written with two
# dots: metadata values are JSON-parsed, and "2.5" would read back as a float.
DEMO_LTX25_MODEL_VERSION = "2.5.1"


# Output height and width must be multiples of these: one latent cell is 32 pixels, and the two-stage
# pipelines run stage 1 at half the output size.
ONE_STAGE_SPATIAL_MULTIPLE = 32


TWO_STAGE_SPATIAL_MULTIPLE = 64


# How many guidance passes (conditional, negative, STG, isolation) share one transformer call. One at a
# time, as the reference runs them: the lowest memory and bit-level parity; larger is faster.
DEFAULT_MAX_BATCH_SIZE = 1


# H.264 CRF of the image re-compression; it reproduces the artefacts of the training data, so it is
# a property of the model version.
LTX_2_IMAGE_CRF = 33


LTX_2_4_IMAGE_CRF = 18


@dataclass(frozen=True)
class PipelineDefaults:
    """CLI defaults of one model version. `height`/`width` are the one-stage (stage-1) size.

    The guidance knobs are ltx-core's `MultiModalGuiderParams`: `modality_scale` is what the CLI calls
    `--a2v-guidance-scale` (video) / `--v2a-guidance-scale` (audio).
    """

    seed: int = 10
    height: int = 512
    width: int = 768
    num_frames: int = 121
    frame_rate: float = 24.0
    num_inference_steps: int = 40
    image_crf: int = LTX_2_IMAGE_CRF
    dtype: str = "bfloat16"
    video_guidance: MultiModalGuiderParams = field(
        default_factory=lambda: MultiModalGuiderParams(
            cfg_scale=3.0, stg_scale=1.0, rescale_scale=0.7, modality_scale=3.0, skip_step=0, stg_blocks=(29,)
        )
    )
    audio_guidance: MultiModalGuiderParams = field(
        default_factory=lambda: MultiModalGuiderParams(
            cfg_scale=7.0, stg_scale=1.0, rescale_scale=0.7, modality_scale=3.0, skip_step=0, stg_blocks=(29,)
        )
    )

    two_stage_height: int = field(init=False)
    """Output height of the two-stage pipelines (stage 2 runs at twice the stage-1 size)."""
    two_stage_width: int = field(init=False)

    def __post_init__(self) -> None:
        # Fields, not properties: `--help` formats the run's defaults from the fields (`Flag.shown`).
        object.__setattr__(self, "two_stage_height", self.height * 2)
        object.__setattr__(self, "two_stage_width", self.width * 2)


LTX_2_DEFAULTS = PipelineDefaults()


LTX_2_3_DEFAULTS = replace(
    LTX_2_DEFAULTS,
    num_inference_steps=30,
    video_guidance=replace(LTX_2_DEFAULTS.video_guidance, stg_blocks=(28,)),
    audio_guidance=replace(LTX_2_DEFAULTS.audio_guidance, stg_blocks=(28,)),
)


# 2.4 keeps everything of 2.3 but the image CRF.
LTX_2_4_DEFAULTS = replace(LTX_2_3_DEFAULTS, image_crf=LTX_2_4_IMAGE_CRF)


# The HQ two-stage preset (res2s sampler): 15 steps at 1088x1920 output, STG off.
LTX_2_3_HQ_DEFAULTS = PipelineDefaults(
    num_inference_steps=15,
    height=1088 // 2,
    width=1920 // 2,
    video_guidance=MultiModalGuiderParams(
        cfg_scale=3.0, stg_scale=0.0, rescale_scale=0.45, modality_scale=3.0, skip_step=0, stg_blocks=()
    ),
    audio_guidance=MultiModalGuiderParams(
        cfg_scale=7.0, stg_scale=0.0, rescale_scale=1.0, modality_scale=3.0, skip_step=0, stg_blocks=()
    ),
)


# The HQ pipeline fuses the distilled LoRA into both stages, lightly into the guided first one.
HQ_DISTILLED_LORA_STRENGTH_STAGE_1 = 0.25


HQ_DISTILLED_LORA_STRENGTH_STAGE_2 = 0.5


# Newest generation first: a checkpoint gets the preset of the newest generation it is at or above,
# so an unknown newer version inherits the closest known one rather than the 2.0 values.
_DEFAULTS_SINCE_VERSION: tuple[tuple[tuple[int, ...], PipelineDefaults], ...] = (
    ((2, 4), LTX_2_4_DEFAULTS),
    ((2, 3), LTX_2_3_DEFAULTS),
)


# The negative prompt of the reference CLIs, kept as its phrases so that edits stay readable.
_NEGATIVE_PROMPT_PHRASES = (
    "has_subtitles",
    "has_blurbox",
    "transition from black",
    "transition to black",
    "speech_ending_short",
    "blurry",
    "out of focus",
    "overexposed",
    "underexposed",
    "low contrast",
    "washed out colors",
    "excessive noise",
    "grainy texture",
    "poor lighting",
    "flickering",
    "motion blur",
    "distorted proportions",
    "unnatural skin tones",
    "deformed facial features",
    "asymmetrical face",
    "missing facial features",
    "extra limbs",
    "disfigured hands",
    "wrong hand count",
    "artifacts around text",
    "inconsistent perspective",
    "camera shake",
    "incorrect depth of field",
    "background too sharp",
    "background clutter",
    "distracting reflections",
    "harsh shadows",
    "inconsistent lighting direction",
    "color banding",
    "cartoonish rendering",
    "3D CGI look",
    "unrealistic materials",
    "uncanny valley effect",
    "incorrect ethnicity",
    "wrong gender",
    "exaggerated expressions",
    "wrong gaze direction",
    "mismatched lip sync",
    "silent or muted audio",
    "distorted voice",
    "robotic voice",
    "echo",
    "background noise",
    "off-sync audio",
    "incorrect dialogue",
    "added dialogue",
    "repetitive speech",
    "jittery movement",
    "awkward pauses",
    "incorrect timing",
    "unnatural transitions",
    "inconsistent framing",
    "tilted camera",
    "flat lighting",
    "inconsistent tone",
    "cinematic oversaturation",
    "stylized filters",
    "or AI artifacts",
)


DEFAULT_NEGATIVE_PROMPT = ", ".join(_NEGATIVE_PROMPT_PHRASES) + "."


def normalize_model_version(version: object) -> tuple[int, ...]:
    """`model_version` metadata -> comparable tuple; '2.4-rc2' counts as 2.4, unset or unparsable as ()."""
    from ltx_core.loader.checkpoint_info import declared_model_version

    return declared_model_version(version)


def defaults_for_version(model_version: tuple[int, ...]) -> PipelineDefaults:
    for since, defaults in _DEFAULTS_SINCE_VERSION:
        if model_version >= since:
            return defaults
    return LTX_2_DEFAULTS


def default_image_crf(model_version: tuple[int, ...]) -> int:
    """CRF at which image conditionings are re-encoded: 33 up to LTX-2.3, 18 from LTX-2.4 on."""
    return defaults_for_version(model_version).image_crf


def checkpoint_model_version(path: ModelSource) -> tuple[int, ...]:
    """The `model_version` a checkpoint declares (a single file; a model folder or set of model files:
    its transformer's), or () when it declares none or cannot be read. Given a `ModelFiles` set (what a
    pipeline holds), the answer is the set's `info`, worked out once."""
    from ltx_core.loader import CheckpointError
    from ltx_core.loader.model_files import model_files_of

    try:
        return model_files_of(path).info.model_version
    except CheckpointError as e:
        logger.warning("could not read the model version of %s (%s); using LTX-2 defaults", path, e)
        return ()


def defaults_for_checkpoint(path: ModelSource) -> PipelineDefaults:
    return defaults_for_version(checkpoint_model_version(path))


DEFAULT_REFERENCE_STRENGTH = 1.0


MAX_TEMPORAL_ROUNDS = 2


DEFAULT_NUM_FRAMES = 161


DEFAULT_SEED = 10


DEFAULT_SPATIAL_TILE = 1280


SPATIAL_TILE_OVERLAP = 256


VIDEO_SUFFIXES = (".mp4", ".mov")


DEMO_NUM_FRAMES = 9


Stage2Parallel = Literal["sequence", "tiled"]


STAGE_2_PARALLEL_MODES: tuple[str, ...] = ("sequence", "tiled")


DEFAULT_STAGE_2_TILE_OVERLAP = 5


"""Latent cells neighbouring stage-2 tiles share (the reference's overlap)."""
