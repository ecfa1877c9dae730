"""Per-generation defaults and the image CRF choice."""

from __future__ import annotations

import argparse

from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.engine.model_versions import (
    DEFAULT_NEGATIVE_PROMPT,
    LTX_2_3_DEFAULTS,
    LTX_2_3_HQ_DEFAULTS,
    LTX_2_4_DEFAULTS,
    LTX_2_DEFAULTS,
    checkpoint_model_version,
    default_image_crf,
    defaults_for_version,
    normalize_model_version,
)


def test_image_crf_by_generation():
    assert default_image_crf(()) == 33
    assert default_image_crf((2, 0)) == 33
    assert default_image_crf((2, 3, 0)) == 33
    assert default_image_crf((2, 4)) == 18
    assert default_image_crf((2, 5, 1)) == 18  # newer versions inherit the newest known generation


def test_presets_differ_where_the_generations_do():
    assert defaults_for_version(()) is LTX_2_DEFAULTS
    assert defaults_for_version((2, 3, 0)) is LTX_2_3_DEFAULTS
    assert defaults_for_version((2, 4, 0)) is LTX_2_4_DEFAULTS
    assert (LTX_2_DEFAULTS.num_inference_steps, LTX_2_DEFAULTS.video_guidance.stg_blocks) == (40, (29,))
    assert (LTX_2_3_DEFAULTS.num_inference_steps, LTX_2_3_DEFAULTS.audio_guidance.stg_blocks) == (30, (28,))
    assert LTX_2_3_DEFAULTS.video_guidance.cfg_scale == 3.0 and LTX_2_3_DEFAULTS.audio_guidance.cfg_scale == 7.0
    assert (LTX_2_3_DEFAULTS.two_stage_height, LTX_2_3_DEFAULTS.two_stage_width) == (1024, 1536)
    assert (LTX_2_3_HQ_DEFAULTS.two_stage_height, LTX_2_3_HQ_DEFAULTS.two_stage_width) == (1088, 1920)
    assert LTX_2_3_HQ_DEFAULTS.video_guidance.stg_scale == 0.0 and LTX_2_3_HQ_DEFAULTS.video_guidance.stg_blocks == ()


def test_model_version_parsing(model_files):
    assert normalize_model_version("2.4-rc2") == (2, 4)
    assert normalize_model_version(None) == ()
    assert checkpoint_model_version(model_files.checkpoint) == (2, 3, 0)
    assert checkpoint_model_version(model_files.checkpoint_v20) == ()
    assert checkpoint_model_version(model_files.not_safetensors) == ()


def test_the_command_line_takes_the_defaults_of_the_checkpoints_generation(model_files):
    def defaults(checkpoint: object, *, distilled: bool = False):
        group = ModelFlags(distilled=distilled)
        return group.model_version_defaults(argparse.Namespace(**{group.checkpoint_dest: checkpoint}))

    assert defaults(str(model_files.checkpoint_v20)) is LTX_2_DEFAULTS
    assert defaults(str(model_files.checkpoint_v24)) is LTX_2_4_DEFAULTS
    assert defaults(str(model_files.checkpoint), distilled=True) is LTX_2_3_DEFAULTS
    assert defaults(None) is LTX_2_3_DEFAULTS
    assert defaults("/no/such/file.safetensors") is LTX_2_3_DEFAULTS


def test_negative_prompt_is_the_phrase_list():
    assert DEFAULT_NEGATIVE_PROMPT.startswith("has_subtitles, has_blurbox, transition from black")
    assert DEFAULT_NEGATIVE_PROMPT.endswith("stylized filters, or AI artifacts.")
