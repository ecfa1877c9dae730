"""A command's pipeline call and memory check are the union of what its flag groups contribute: each flag
reaches the call in the pipeline's request values (`VideoRequest`, `GuidanceRequest`) or under its own keyword,
every argument binds to the pipeline's `generate`, and two groups setting one argument are refused."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import replace
from typing import Any

import pytest

from ltx_pipelines import distilled, t2a_one_stage, ti2vid_two_stages
from ltx_pipelines.cli.command import Run
from ltx_pipelines.cli.flag_group import FlagGroup, MemoryInputs, ReadContext, Reading
from ltx_pipelines.cli.request_flags import PromptFlags
from ltx_pipelines.pipelines.distilled import DistilledPipeline
from ltx_pipelines.pipelines.t2a_one_stage import T2AOneStagePipeline
from ltx_pipelines.pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline


def _binds(pipeline: type, run: Run) -> dict[str, Any]:
    """The call's arguments as the pipeline's `generate` receives them (TypeError: one it does not take)."""
    bound = inspect.signature(pipeline.generate).bind(None, run.prompt.text, **run.call_arguments())
    return dict(bound.arguments)


def test_distilled_call_carries_every_group(model_files, tmp_path):
    run = distilled.COMMAND.parse([
        "--distilled-checkpoint-path", str(model_files.checkpoint), "--spatial-upsampler-path",
        str(model_files.upsampler), "--gemma-root", str(model_files.gemma_root), "--prompt", "a fox",
        "--output-path", str(tmp_path / "fox.mp4"), "--seed", "7", "--height", "256", "--width", "384",
        "--num-frames", "17", "--enhance-prompt",
    ])  # fmt: skip
    arguments = _binds(DistilledPipeline, run)
    video = arguments["video"]
    assert arguments["prompt"] == "a fox"
    assert (arguments["seed"], arguments["enhance_prompt"]) == (7, True)
    assert (video.height, video.width, video.num_frames) == (256, 384, 17)
    assert video.generated_keyframes == 0
    assert video.duration is None
    # Nothing a group did not set reaches the call: no guidance on the distilled pipeline.
    assert "guidance" not in run.call_arguments()


def test_guided_call_and_memory_inputs(model_files, tmp_path):
    run = ti2vid_two_stages.COMMAND.parse([
        "--checkpoint-path", str(model_files.checkpoint), "--spatial-upsampler-path", str(model_files.upsampler),
        "--distilled-lora", str(model_files.lora), "--gemma-root", str(model_files.gemma_root),
        "--prompt", "a fox", "--output-path", str(tmp_path / "fox.mp4"), "--negative-prompt", "blur",
        "--num-inference-steps", "5", "--video-cfg-guidance-scale", "2.5", "--max-batch-size", "3",
        "--tile-size", "512", "--tile-frames", "0",
    ])  # fmt: skip
    guidance = _binds(TI2VidTwoStagesPipeline, run)["guidance"]
    assert (guidance.negative_prompt, guidance.num_inference_steps) == ("blur", 5)
    assert guidance.video.cfg_scale == 2.5
    assert guidance.audio is not None
    inputs = run.memory_inputs()
    assert (inputs.prompts, inputs.batch, inputs.enhance) == (2, 3, False)
    assert inputs.tiling == run.tiling and inputs.tiling is not None
    assert (inputs.height, inputs.width, inputs.num_frames) == (run.video.height, run.video.width, run.video.num_frames)


def test_audio_only_call_has_no_picture_and_one_guided_modality(model_files, tmp_path):
    run = t2a_one_stage.COMMAND.parse([
        "--checkpoint-path", str(model_files.checkpoint), "--gemma-root", str(model_files.gemma_root),
        "--prompt", "rain", "--output-path", str(tmp_path / "rain.wav"), "--num-frames", "25",
    ])  # fmt: skip
    arguments = _binds(T2AOneStagePipeline, run)
    video, guidance = arguments["video"], arguments["guidance"]
    assert video.num_frames == 25
    assert (video.height, video.width, video.images) == (None, None, ())
    assert guidance.video is None and guidance.audio is not None
    assert run.memory_inputs().height is None


class _SeedAgain(FlagGroup[int]):
    """A group that (wrongly) sets the prompt group's `seed` too."""

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[int]:
        return Reading(1, call_arguments={"seed": 1})


class _EnhanceAgain(FlagGroup[int]):
    """A group that (wrongly) sets the prompt group's memory input `enhance` too."""

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[int]:
        return Reading(1, memory_inputs={"enhance": True})


def _distilled_argv(model_files, tmp_path) -> list[str]:
    return [
        "--distilled-checkpoint-path", str(model_files.checkpoint), "--spatial-upsampler-path",
        str(model_files.upsampler), "--gemma-root", str(model_files.gemma_root), "--prompt", "a fox",
        "--output-path", str(tmp_path / "fox.mp4"),
    ]  # fmt: skip


def test_two_groups_setting_one_argument_are_refused(model_files, tmp_path):
    argv = _distilled_argv(model_files, tmp_path)
    clashes = (
        (_SeedAgain(), r"call_arguments 'seed' is set by both PromptFlags and _SeedAgain"),
        (_EnhanceAgain(), r"memory_inputs 'enhance' is set by both PromptFlags and _EnhanceAgain"),
    )
    for group, message in clashes:
        clashing = replace(distilled.COMMAND, groups=(*distilled.COMMAND.groups, group))
        with pytest.raises(ValueError, match=message):
            clashing.parse(argv)
    run = distilled.COMMAND.parse(argv)
    assert isinstance(run.memory_inputs(), MemoryInputs)
    assert PromptFlags in run.values


class _CountsSettles(FlagGroup[int]):
    """A group whose reading asks to be settled or not (`asks`), counting the settles."""

    def __init__(self, asks: bool) -> None:
        self.asks, self.settled = asks, 0

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[int]:
        return Reading(1, record={"counted": 1}, settle=self.asks)

    def settle(self, value: int, models: Any, context: ReadContext) -> Reading[int]:
        self.settled += 1
        return Reading(value + 1, record={"counted": value + 1})


def test_a_group_is_settled_only_where_its_reading_asks(model_files, tmp_path):
    argv = _distilled_argv(model_files, tmp_path)
    for asks in (False, True):
        group = _CountsSettles(asks)
        run = replace(distilled.COMMAND, groups=(*distilled.COMMAND.groups, group)).parse(argv)
        assert group.settled == (1 if asks else 0)
        # The settled reading replaces the read one: its value and what the sidecar records of it.
        assert run[_CountsSettles] == run.parameters["counted"] == (2 if asks else 1)
