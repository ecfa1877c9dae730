"""Text-to-audio with a full checkpoint: `python -m ltx_pipelines.t2a_one_stage`.

One guided stage over the audio stream only: the transformer is built as the audio-only variant, so
none of the video weights is read from the file. The length comes from `--num-frames` /
`--frame-rate` (round(frames / fps * 25) audio latent steps); the LTX-2 scheduler's sigmas, Euler
steps, audio CFG against the negative prompt, STG and rescaling; the latent is decoded by the audio
VAE and the vocoder and written as a 16-bit stereo WAV at the vocoder's rate, with its sidecar.
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.command import PipelineCommand, forward_to, resolve
from ltx_pipelines.cli.guidance_flags import GuidanceFlags, MaxBatchSizeFlags
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.request_flags import VideoFlags
from ltx_pipelines.cli.runtime_flags import OutputFlags, RuntimeFlags

COMMAND = PipelineCommand.for_module(
    __name__,
    __doc__,
    models=ModelFlags(distilled=False, video=False),  # audio only: no video VAE is read
    groups=(VideoFlags(picture=False), GuidanceFlags(video=False, audio=True, cross_modal=False), MaxBatchSizeFlags()),
    build=lambda run: resolve("ltx_pipelines.pipelines.t2a_one_stage:T2AOneStagePipeline")(
        run.models.checkpoint, run.models.gemma_root, max_batch_size=run[MaxBatchSizeFlags], **run.pipeline_options()
    ),
    output=OutputFlags(suffixes=(".wav",)),
    runtime=RuntimeFlags(memory=False),
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.t2a_one_stage")


if __name__ == "__main__":
    sys.exit(main())
