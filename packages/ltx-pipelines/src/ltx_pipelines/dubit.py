"""Dub-It video-to-video, distilled two-stage: `python -m ltx_pipelines.dubit` (the LTX-2.5 name of lip-dub).

One Dub-It IC-LoRA (`--lora`, exactly once) is fused into the distilled transformer used by both stages.
The `--reference-video` conditions both: its frames as IC reference tokens (at `--reference-strength`, at the
LoRA's reference downscale factor), and its audio track, VAE-encoded, as reference audio tokens with negative
RoPE times (ending just before the clip's start), so the new speech follows the reference's timing. The frame
count is the reference's, snapped down to 8k+1; the frame rate is its container's. Stage 2 refines the video
with the stage-1 audio frozen (sigma 0 for it in the model's timestep conditioning) and referenced; the
stage-1 audio is the one written. Stage 1 is plain Euler on every model version.

`python -m ltx_pipelines.lipdub` is the same pipeline under its LTX-2.3 name; this entry point adds the
LTX-2.5 demo family (`--demo --demo-family ltx-2.5`, which fuses the demo set's tiny Dub-It IC-LoRA unless
`--lora` names one).
"""

from __future__ import annotations

import sys

from ltx_pipelines.cli.command import forward_to
from ltx_pipelines.engine.model_versions import DEMO_FAMILIES
from ltx_pipelines.lipdub import lip_dub_command

COMMAND = lip_dub_command(
    __name__,
    __doc__,
    "ltx_pipelines.pipelines.dubit:DubItPipeline",
    lora_keyword="ic_lora",
    lora_name="Dub-It",
    demo_families=DEMO_FAMILIES,
    demo_ic_lora="dubit_ic_lora",
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.dubit")


if __name__ == "__main__":
    sys.exit(main())
