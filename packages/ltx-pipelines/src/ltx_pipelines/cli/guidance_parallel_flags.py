"""The checks of `--guidance-parallel` (a flag of `cli/multigpu.py`'s group) that need the whole command line:
the pass groups a guided step forms must split the checkpoint's attention heads, and the step cache is refused
(it does not combine). Run before any rank starts or loads a weight."""

from __future__ import annotations

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_pipelines.cli.command import Run
from ltx_pipelines.cli.flag_group import FlagError
from ltx_pipelines.cli.step_cache_flags import StepCacheFlags


def check_guidance_parallel_run(run: Run, num_gpus: int) -> None:
    from ltx_core.components.denoisers import guidance_passes
    from ltx_core.multigpu import check_config_heads_divide, pass_group_count

    if run.values.get(StepCacheFlags) is not None:
        raise FlagError("--guidance-parallel does not combine with --step-cache; leave out one of them")
    guidance = run.guidance
    params: dict[str, MultiModalGuiderParams] = {
        name: p for name, p in (("video", guidance.video), ("audio", guidance.audio)) if p is not None
    }
    passes = len(guidance_passes(params))
    size = num_gpus // pass_group_count(num_gpus, passes)
    try:
        check_config_heads_divide(run.models.transformer_config, size)
    except ValueError as error:
        raise FlagError(
            f"--num-gpus {num_gpus} --guidance-parallel: {passes} passes per step leave groups of {size} ranks; {error}"
        ) from None
