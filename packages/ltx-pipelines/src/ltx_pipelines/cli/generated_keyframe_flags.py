"""`--num-generated-keyframes N`: N evenly spaced interior keyframe slots in stage 1 (0, the default: off).

Only the pipelines that hand it to their first stage add the group (distilled, the text/image-to-video ones and
their `*_mgpu` twins), so no command parses the flag and ignores it. The count is checked against the clip's
interior frames as soon as the flags are read, and the transformer's keyframe embedding once the model files
are known, both before anything loads.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.cli.video_flags import VideoFlags
from ltx_pipelines.engine.defaults import PipelineDefaults

FLAG = "--num-generated-keyframes"


@dataclass(frozen=True)
class GeneratedKeyframeFlags(FlagGroup[int]):
    """`--num-generated-keyframes`, read as the count the pipeline's `generated_keyframes` takes."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        parser.add_argument_group("generated keyframes").add_argument(
            FLAG,
            type=int,
            default=0,
            metavar="N",
            help="Extra keyframes generated in stage 1 at N evenly spaced interior frames (both end frames excluded; "
            "default: 0, off). Each sharpens the motion around its frame but costs a whole latent frame of tokens "
            "for one pixel frame (about N / latent frames more sequence length). Needs a transformer with the "
            "keyframe embedding (use_keyframes_abs_pos_embedding: LTX-2.5).",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> int:
        from ltx_pipelines.engine.generated_keyframes import generated_keyframe_positions

        count = args.num_generated_keyframes
        video = context.value(VideoFlags)
        if count < 0:
            raise FlagError(f"{FLAG} {count} is not accepted: it must be 0 (off) or a positive count")
        # A length the duration head picks is only known at run time: the pipeline checks it then.
        if video.duration is None:
            try:
                generated_keyframe_positions(count, video.num_frames)
            except ValueError as e:
                raise FlagError(f"{FLAG}: {e} (--num-frames {video.num_frames})") from None
        return int(count)

    def settle(self, value: int, models: RunModels, context: ReadContext) -> int:
        from ltx_pipelines.engine.generated_keyframes import keyframe_embedding_problem

        if value:
            problem = keyframe_embedding_problem(models.checkpoint)
            if problem is not None:
                raise FlagError(f"{FLAG} {value} cannot run on {models.checkpoint}: {problem}")
        return value

    def record(self, value: int) -> dict[str, Any]:
        return {"num_generated_keyframes": value}

    def call_arguments(self, value: int) -> dict[str, Any]:
        return {"generated_keyframes": value}
