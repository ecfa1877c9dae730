"""The command-line layer: flag groups, checks before any model loads, hf:// resolution, and the one
parse -> build -> generate -> write flow every `python -m ltx_pipelines.<name>` runs (`command.PipelineCommand`;
each module's `main` is its `COMMAND.main`).

Each group (`model_flags`; `request_flags`: prompt, video and generated keyframes; `runtime_flags`: runtime, tiling
and output; `guidance_flags`, `multigpu`, and a pipeline's own group in its module) adds its flags, checks them and
returns one frozen value; the sidecar records what the groups say they used. To add a flag, add it to the group
that owns its subject (its `add`, `read` and `record`) and use the value where it matters: nothing else changes.
"""
