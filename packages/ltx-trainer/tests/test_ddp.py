"""Two data-parallel CPU processes (gloo) train exactly like one process with the doubled batch.

Sample noise and sigmas are drawn per sample (keyed by the run seed, the micro-step and the sample), and
rank r takes the r-th slice of each global batch, so the only difference is the order of floating-point
reductions. The LR schedule advances once per optimizer step, not once per process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from ltx_trainer.config import parse_config
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config, write_dataset

LINE = re.compile(r"^step (\d+)/\d+ loss ([\d.]+) lr ([\d.e+-]+) ", re.MULTILINE)


def _curve(stdout: str) -> list[tuple[int, float, float]]:
    return [(int(s), float(loss), float(lr)) for s, loss, lr in LINE.findall(stdout)]


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_doubled_batch(tmp_path):
    from ltx_pipelines.demo import write_demo_checkpoint

    checkpoint = tmp_path / "tiny.safetensors"
    write_demo_checkpoint(checkpoint)
    data = write_dataset(tmp_path / "data", num_samples=8)
    configs = {}
    for name, batch in (("single", 4), ("ddp", 2)):
        raw = training_config(
            checkpoint, data, tmp_path / f"out-{name}", "t2v",
            optimization={"steps": 4, "batch_size": batch, "learning_rate": 1e-2, "scheduler_type": "linear"},
        )  # fmt: skip
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump(raw))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    train = ["-m", "ltx_trainer.train", "--disable-progress-bars", "--log-every", "1"]
    # accelerate's CPU launcher starts one process; its torchrun launcher (--multi_gpu) starts two, which
    # find no GPU and join a gloo process group.
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]  # fmt: skip
    ddp = subprocess.run([*launch, *train, str(configs["ddp"])], env=env, capture_output=True, text=True, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    # The one-process baseline runs in this process (same code path as `python -m ltx_trainer.train`).
    history = Trainer(parse_config(yaml.safe_load(configs["single"].read_text()))).train().history
    ddp_curve, single_curve = _curve(ddp.stdout), [(r.step, r.loss, r.lr) for r in history]
    assert [s for s, _, _ in single_curve] == [1, 2, 3, 4]
    assert [s for s, _, _ in ddp_curve] == [1, 2, 3, 4], "rank 0 logs each step once"
    for (_, loss_d, lr_d), (_, loss_s, lr_s) in zip(ddp_curve, single_curve):
        assert loss_d == pytest.approx(loss_s, abs=1e-4, rel=1e-4)
        assert lr_d == pytest.approx(lr_s, rel=1e-3)  # the log line prints 4 significant digits
    a = load_file(tmp_path / "out-ddp" / "checkpoints" / "lora_weights_step_00004.safetensors")
    b = load_file(tmp_path / "out-single" / "checkpoints" / "lora_weights_step_00004.safetensors")
    assert a.keys() == b.keys()
    # Adam divides by the gradient's running RMS, so rounding-level gradient differences on near-zero
    # gradients move single weights by up to ~1e-4 after 4 steps at lr 1e-2.
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=5e-4, rtol=1e-2)


@pytest.mark.slow
def test_sigterm_to_the_launcher_stops_both_ranks_cleanly_and_leaves_a_resumable_checkpoint(tmp_path):
    """Slurm and docker stop a data-parallel run by signalling the launcher: every rank stops (no rank hangs
    in a collective), says how to resume, and the newest checkpoint is complete, with no temporary file or
    lock left. (The launcher itself, torch's elastic agent, ends with its own traceback and exit 1.)"""
    import signal

    from ltx_pipelines.demo import write_demo_checkpoint
    from ltx_trainer.training import checkpoints as ckpt

    checkpoint = tmp_path / "tiny.safetensors"
    write_demo_checkpoint(checkpoint)
    data = write_dataset(tmp_path / "data", num_samples=8)
    out = tmp_path / "out"
    raw = training_config(
        checkpoint, data, out, "t2v", optimization={"steps": 500, "batch_size": 2},
        checkpoints={"interval": 1, "keep_last_n": -1, "save_training_state": "full", "precision": "float32"},
    )  # fmt: skip
    config = tmp_path / "ddp.yaml"
    config.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]  # fmt: skip
    train = ["-m", "ltx_trainer.train", "--disable-progress-bars", "--log-every", "1", str(config)]
    process = subprocess.Popen([*launch, *train], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "saved " in line:
                break
        else:
            pytest.fail(f"the run ended before its first save: {process.wait()}")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)  # a rank stuck in a collective would time out here
    finally:
        if process.poll() is None:
            process.kill()
    stopped = [line for line in stderr.splitlines() if line.startswith("error: stopped by SIGTERM;")]
    assert len(stopped) == 2 and all("model.load_checkpoint" in line for line in stopped), stderr[-3000:]
    folder = out / "checkpoints"
    newest = ckpt.latest_complete(folder)
    assert newest is not None and newest == ckpt.latest_weights(folder) and newest.name in stopped[0]
    leftovers = [p.name for p in out.rglob("*") if ".partial" in p.name or p.name == ".training.lock"]
    assert leftovers == []
