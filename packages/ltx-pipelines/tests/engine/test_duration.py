"""The length from the prompt (`engine.duration`) on the tiny LTX-2.5 demo files: whether a set can
predict, the predicted frame count's grid and range, and the refusal without a duration head."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import CheckpointError
from ltx_core.model.duration_head import DurationRange
from ltx_core.text_encoders.gemma.prompt_encoding import encode_prompts_from_files
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.prompt_pipeline import has_duration_head, predict_frame_count

pytestmark = pytest.mark.slow

CPU = Placement(torch.device("cpu"), torch.float32)


@pytest.fixture(scope="module")
def contexts(ltx25_demo):
    with torch.inference_mode():
        return encode_prompts_from_files(
            ["a red fox runs through snow"], ltx25_demo.model_files(), dtype=torch.float32, device="cpu"
        ).contexts


def test_has_duration_head(ltx25_demo, demo_model_files):
    assert has_duration_head(ltx25_demo.model_files())
    assert not has_duration_head(ltx25_demo.model_files(duration_head=False))
    assert not has_duration_head(demo_model_files.checkpoint)  # the LTX-2.3 single file has none


@pytest.mark.parametrize(("low", "high", "fps"), [(0.5, 2.0, 24.0), (1.0, 1.0, 25.0), (3.0, 6.0, 30.0)])
def test_predicted_frames_are_in_range_and_on_the_vae_grid(ltx25_demo, contexts, low, high, fps):
    frames = predict_frame_count(
        ltx25_demo.model_files(), CPU, contexts, frame_rate=fps, duration_range=DurationRange(low, high)
    )
    assert (frames - 1) % 8 == 0
    # The grid point at or below the clamped seconds (or the next one up when that falls short of the minimum).
    assert round(low * fps) - 8 < frames <= max(round(high * fps), 1)


def test_the_same_contexts_give_the_same_length(ltx25_demo, contexts):
    files = ltx25_demo.model_files()
    first = predict_frame_count(files, CPU, contexts, frame_rate=24.0, duration_range=DurationRange())
    assert predict_frame_count(files, CPU, contexts, frame_rate=24.0, duration_range=DurationRange()) == first


def test_without_a_head_the_prediction_is_refused_naming_the_flag(ltx25_demo, contexts):
    with pytest.raises(CheckpointError, match="--duration-head-path"):
        predict_frame_count(
            ltx25_demo.model_files(duration_head=False), CPU, contexts, frame_rate=24.0, duration_range=DurationRange()
        )


def test_a_range_beyond_the_models_temporal_positions_is_refused(ltx25_demo):
    """The limit is the transformer's temporal RoPE extent, read from its config (20 s when it states none)."""
    from dataclasses import replace

    from ltx_pipelines.cli.flag_group import FlagError, ReadContext
    from ltx_pipelines.cli.model_resolution import RunModels
    from ltx_pipelines.cli.request_flags import VideoChoice, VideoFlags
    from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS
    from ltx_pipelines.engine.prompt_pipeline import check_duration_range, check_length_request

    check_duration_range(DurationRange(1.0, 20.0), {})
    with pytest.raises(ValueError, match=r"beyond the 20 s .*accepted: 0 < MIN_SECONDS <= MAX_SECONDS <= 20"):
        check_duration_range(DurationRange(1000.0, 100000.0), {})
    with pytest.raises(ValueError, match=r"beyond the 10 s"):
        check_duration_range(DurationRange(1.0, 12.0), {"positional_embedding_max_pos": [10, 2048, 2048]})
    # The library call and the command line refuse it before anything is loaded.
    files = ltx25_demo.model_files()
    with pytest.raises(ValueError, match="beyond the"):
        check_length_request(files, None, DurationRange(1000.0, 100000.0))
    models = RunModels(checkpoint=files, gemma_root=None, metadata={"config": files.config()})
    choice = VideoChoice(num_frames=9, frame_rate=24.0, height=64, width=64, frames_given=False)
    context = ReadContext(defaults=LTX_2_3_DEFAULTS, demo=False, values={})
    flags = VideoFlags(two_stage=True, auto_duration=True)
    with pytest.raises(FlagError, match=r"--auto-duration 1000 100000 is not accepted: .*<= 20"):
        flags.settle(replace(choice, duration=DurationRange(1000.0, 100000.0)), models, context)
    assert flags.settle(replace(choice, duration=DurationRange(1.0, 2.0)), models, context).value.duration is not None
