"""SIGTERM (Slurm, docker, `timeout`, systemd) ends a pipeline run like Ctrl-C: one `error:` line, exit
code 143 (128 + SIGTERM), the denoised latents kept with the decode command when denoising had
finished, and no temporary file left. Each run is a real `--demo` process, stopped at a known point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# Runs the demo with one step replaced by "say READY, then wait": the test sends SIGTERM on READY.
_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import {module} as target
    from ltx_pipelines import distilled

    real = target.{name}

    def stall(*args, **kwargs):
        {before}
        print("READY", flush=True)
        {wait}
        return real(*args, **kwargs)

    target.{name} = stall
    sys.exit(distilled.main(sys.argv[1:]))
    """
)


def _run_until_ready_then_term(
    tmp_path: Path, cache_home: Path, module: str, name: str, before: str = "pass", wait: str = "time.sleep(120)"
):
    output = tmp_path / "out" / "clip.mp4"
    script = _SCRIPT.format(module=module, name=name, before=before, wait=wait)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-c", script, "--demo", "--prompt", "a cat", "--output-path", str(output)]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() == "READY":
                break
        else:
            pytest.fail(f"the run ended before the stall point: {process.wait()} {process.stderr.read()}")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, err, output


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def test_sigterm_while_denoising_exits_143_with_one_line(tmp_path, demo_cache_home):
    code, err, output = _run_until_ready_then_term(
        tmp_path, demo_cache_home, "ltx_pipelines.engine.two_stage_runner", "run_denoising_stage"
    )
    assert code == 143, err
    assert "Traceback" not in err
    assert _last_line(err) == "error: terminated (SIGTERM)"
    assert not output.parent.exists() or not list(output.parent.iterdir()), "nothing may be left"


def test_sigterm_that_c_code_turns_into_its_own_error_still_ends_as_terminated(tmp_path, demo_cache_home):
    # What a safetensors read or a torch kernel may do with a signal landing inside it: drop the pending
    # `Terminated` and raise an error of its own. The line must not blame a model file or an input.
    swallow = (
        "try:\n        time.sleep(120)\n    except KeyboardInterrupt:\n"
        "        raise TypeError('could not determine the shape of object type UntypedStorage') from None"
    )
    code, err, output = _run_until_ready_then_term(
        tmp_path, demo_cache_home, "ltx_pipelines.engine.two_stage_runner", "run_denoising_stage", wait=swallow
    )
    assert code == 143, err
    assert _last_line(err) == "error: terminated (SIGTERM)", err[-2000:]
    assert not output.parent.exists() or not list(output.parent.iterdir()), "nothing may be left"


def test_sigterm_while_encoding_keeps_the_latents_and_removes_the_partial_file(tmp_path, demo_cache_home):
    # Stalled inside the video encoder: the temporary `.partial` file exists then.
    code, err, output = _run_until_ready_then_term(
        tmp_path, demo_cache_home, "ltx_pipelines.engine.generation", "encode_video",
        before="assert list(__import__('pathlib').Path(args[0]).parent.glob('.*.partial*'))",
    )  # fmt: skip
    assert code == 143, err
    assert "Traceback" not in err
    latents = output.parent / "clip.latents.safetensors"
    line = _last_line(err)
    assert line.startswith("error: terminated (SIGTERM); the denoised latents are saved in"), line
    assert f"python -m ltx_pipelines.decode --latents {latents} --output-path {output}" in line
    assert sorted(p.name for p in output.parent.iterdir()) == [latents.name], "only the latents may remain"


def test_sigterm_to_the_multi_gpu_controller_ends_every_rank_with_one_line(tmp_path, demo_cache_home):
    output = tmp_path / "out" / "clip.mp4"
    env = {**os.environ, "XDG_CACHE_HOME": str(demo_cache_home), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "ltx_pipelines.distilled_mgpu", "--demo", "--num-gpus", "2", "--device", "cpu",
            "--prompt", "a cat", "--output-path", str(output)]  # fmt: skip
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        assert process.stderr is not None
        for line in process.stderr:  # the ranks' progress bars: denoising has begun on the ranks
            seen.append(line)
            if "denoising" in line:
                break
        else:
            pytest.fail(f"the run ended before denoising: {process.wait()} {''.join(seen)}")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err
    # Python's multiprocessing resource tracker (its own process) may still warn, after our line, about a
    # semaphore of the terminated ranks; that warning is not ours to word.
    assert _last_line(_without_resource_tracker_warning(err)) == "error: terminated (SIGTERM)", err[-2000:]
    assert not output.parent.exists() or not list(output.parent.glob("*.partial*")), "no temporary file may remain"


def _without_resource_tracker_warning(text: str) -> str:
    lines = text.splitlines()
    kept = [
        line for i, line in enumerate(lines)
        if "resource_tracker" not in line and not (i and "resource_tracker" in lines[i - 1])
    ]  # fmt: skip
    return "\n".join(kept)
