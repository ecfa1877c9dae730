"""What holds when a training run is interrupted, raced or fed damaged files: checkpoints are whole units,
SIGTERM stops like Ctrl-C, one run per output_dir, one clear line for a corrupt sample or a full disk."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from ltx_trainer import train as train_cli
from ltx_trainer.config import parse_config
from ltx_trainer.training import checkpoints as ckpt
from ltx_trainer.training.interrupts import TrainingInterrupted
from ltx_trainer.training.run_lock import LOCK_NAME, OutputDirLocked
from ltx_trainer.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from training_data import training_config

RESUMABLE = {"checkpoints": {"interval": 1, "keep_last_n": -1, "save_training_state": "full", "precision": "float32"}}


def _leftovers(folder: Path) -> list[str]:
    """Temporary files and locks anywhere under `folder`."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".partial" in p.name or p.name == LOCK_NAME)


def _write_yaml(raw: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(raw))
    return path


# -- a checkpoint is one unit ---------------------------------------------------------------------------
def test_a_save_cut_between_the_two_files_publishes_nothing(checkpoint, data_root, tmp_path, monkeypatch):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)
    real_save = torch.save

    def killed_at_step_2(state, path, *a, **k):
        if isinstance(state, dict) and state.get("global_step") == 2:
            raise KeyboardInterrupt  # a kill between the weights and the state
        return real_save(state, path, *a, **k)

    monkeypatch.setattr(ckpt.torch, "save", killed_at_step_2)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    names = sorted(p.name for p in trainer.checkpoint_dir.iterdir())
    assert names == ["lora_weights_step_00001.safetensors", "training_state_step_00001.pt"]
    assert _leftovers(tmp_path / "out") == []

    monkeypatch.setattr(ckpt.torch, "save", real_save)
    raw["model"]["load_checkpoint"] = str(tmp_path / "out")
    history = Trainer(parse_config(raw), disable_progress_bars=True).train().history
    assert [r.step for r in history] == [2, 3]


def test_resume_takes_the_newest_complete_checkpoint_of_an_old_layout(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    Trainer(parse_config(raw)).train(stop_at=2)
    folder = tmp_path / "out" / "checkpoints"
    # The old writer (weights first) interrupted before the state of step 2, plus temporaries of a killed save.
    (folder / ckpt.state_name(2)).unlink()
    stale = folder / ".lora_weights_step_00009.safetensors.abcd1234.partial.safetensors"
    stale.write_bytes(b"half")
    orphan = folder / ckpt.state_name(9)
    orphan.write_bytes(b"state without weights")
    raw["model"]["load_checkpoint"] = str(tmp_path / "out")
    history = Trainer(parse_config(raw)).train().history
    assert [r.step for r in history] == [2, 3]
    assert not stale.exists() and not orphan.exists()
    assert (folder / ckpt.state_name(3)).is_file() and (folder / ckpt.weights_name("lora", 3)).is_file()


def test_a_signal_during_a_save_lets_the_save_finish(checkpoint, data_root, tmp_path, monkeypatch):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)
    real = ckpt.save_lora_file

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the weights are being written
        return real(*args, **kwargs)

    monkeypatch.setattr(ckpt, "save_lora_file", signalled)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.train()
    assert info.value.signum == signal.SIGTERM
    names = sorted(p.name for p in trainer.checkpoint_dir.iterdir())
    assert names == ["lora_weights_step_00001.safetensors", "training_state_step_00001.pt"]
    assert _leftovers(tmp_path / "out") == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the handler is put back"


def test_a_signal_that_a_reader_turns_into_its_own_error_still_stops_as_the_signal(
    checkpoint, data_root, tmp_path, monkeypatch
):
    """A SIGTERM landing inside safetensors/torch C code can surface as an unrelated error (CI saw a
    `TypeError` about `UntypedStorage` shapes, reported as a damaged sample to be deleted). The run must
    stop as SIGTERM, with the resume hint, not blame a good data file."""
    from ltx_trainer.training import data as training_data

    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)

    def signalled_read(path):
        # What a C extension does: it drops the pending interrupt and raises an error of its own.
        with contextlib.suppress(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        raise training_data.DataFileError.about(Path(path), "not a readable sample file (cannot determine shape)")

    monkeypatch.setattr(training_data, "load_sample", signalled_read)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.train()
    assert info.value.signum == signal.SIGTERM
    assert isinstance(info.value.__cause__, training_data.DataFileError), "the original error stays chained"


def test_an_error_without_a_signal_is_not_reported_as_one(checkpoint, data_root, tmp_path, monkeypatch):
    from ltx_trainer.training import data as training_data

    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    trainer = Trainer(parse_config(raw), disable_progress_bars=True)

    def broken_read(path):
        raise training_data.DataFileError.about(Path(path), "not a readable sample file (truncated)")

    monkeypatch.setattr(training_data, "load_sample", broken_read)
    with pytest.raises(training_data.DataFileError):
        trainer.train()


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every entry under `folder`: its bytes (None for folders), mode and mtime."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mode, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def test_a_refused_resume_changes_nothing_in_the_output_dir(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    Trainer(parse_config(raw), disable_progress_bars=True).train(stop_at=1)
    # What an interrupted save leaves: cleaned up by a run that starts, not by one that is refused.
    (tmp_path / "out" / "checkpoints" / ".lora_weights_step_00002.safetensors.abcd1234.partial.safetensors").touch()
    before = _snapshot(tmp_path / "out")
    raw["model"]["load_checkpoint"] = str(tmp_path / "out")
    raw["optimization"]["learning_rate"] = 5e-3
    with pytest.raises(ckpt.ResumeError, match="different settings"):
        Trainer(parse_config(raw), disable_progress_bars=True).train()
    assert _snapshot(tmp_path / "out") == before


# -- SIGTERM and the output_dir lock, through real processes ---------------------------------------------
def _start(config: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ltx_trainer.train", str(config), "--disable-progress-bars", "--log-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_for(process: subprocess.Popen, text: str, timeout: float = 240.0) -> list[str]:
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    process.kill()
    raise AssertionError(f"{text!r} never printed: {''.join(lines)}{process.stderr.read()}")


def test_sigterm_stops_cleanly_and_says_how_to_resume(checkpoint, data_root, tmp_path):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 500}, **RESUMABLE)
    process = _start(_write_yaml(raw, tmp_path / "config.yaml"))
    try:
        _wait_for(process, "saved ")
        assert (tmp_path / "out" / LOCK_NAME).is_file()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith("error: stopped by SIGTERM;") and "model.load_checkpoint" in lines[-1], stderr
    assert "Traceback" not in stderr
    assert _leftovers(tmp_path / "out") == []
    folder = tmp_path / "out" / "checkpoints"
    newest = ckpt.latest_weights(folder)
    assert newest == ckpt.latest_complete(folder) and newest.name in lines[-1]


def test_a_second_run_into_the_same_output_dir_exits_2_naming_the_first(checkpoint, data_root, tmp_path, capsys):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 500})
    config = _write_yaml(raw, tmp_path / "config.yaml")
    first = _start(config)
    try:
        _wait_for(first, "step 1/500")
        assert train_cli.main([str(config)]) == 2
    finally:
        first.kill()
        first.wait()
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: output_dir") and f"pid {first.pid}" in err, err
    assert len(err.splitlines()) == 1


def test_a_stale_lock_of_a_dead_process_is_taken_over(checkpoint, data_root, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).write_text(f'{{"pid": {dead.pid}, "host": "{os.uname().nodename}", "started": "?"}}')
    raw = training_config(checkpoint, data_root, out, optimization={"steps": 1})
    Trainer(parse_config(raw)).train()
    assert not (out / LOCK_NAME).exists()


def test_a_live_lock_is_refused_before_any_model_is_built(checkpoint, data_root, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).write_text(f'{{"pid": {os.getppid()}, "host": "{os.uname().nodename}", "started": "x"}}')
    with pytest.raises(OutputDirLocked, match=rf"in use by another training \(pid {os.getppid()} on"):
        Trainer(parse_config(training_config(checkpoint, data_root, out)))


def _race_for_the_lock(folder: Path, trials: int, gate, results) -> None:
    """One racer: each trial, try to take the lock when the gate opens, report, hold it until every racer
    has tried, then release it."""
    from ltx_trainer.training.run_lock import RunLock

    for _ in range(trials):
        lock = RunLock(folder)
        gate.wait()
        with contextlib.suppress(OutputDirLocked):
            lock.acquire()
        results.put(lock.held)
        gate.wait()  # everyone has tried
        lock.release()
        gate.wait()  # everyone has released


def test_runs_started_together_over_a_stale_lock_take_it_once(tmp_path):
    """A lock left by a killed run (kill -9), and several runs starting at once: exactly one takes it over,
    in every trial (the old read-unlink-create takeover let two win in 7 of 100 trials)."""
    import multiprocessing

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = f'{{"pid": {dead.pid}, "host": "{os.uname().nodename}", "started": "?"}}'
    folder, racers, trials = tmp_path / "out", 4, 300
    folder.mkdir()
    ctx = multiprocessing.get_context("fork")
    gate, results = ctx.Barrier(racers + 1, timeout=60), ctx.Queue()
    procs = [ctx.Process(target=_race_for_the_lock, args=(folder, trials, gate, results)) for _ in range(racers)]
    for p in procs:
        p.start()
    winners = []
    try:
        for _ in range(trials):
            (folder / LOCK_NAME).write_text(stale)
            gate.wait()
            gate.wait()
            winners.append(sum(results.get(timeout=60) for _ in range(racers)))
            gate.wait()
            assert not (folder / LOCK_NAME).exists(), "the winner removes the lock when it releases it"
    finally:
        for p in procs:
            p.join(timeout=60)
            p.kill()
    assert winners == [1] * trials, f"{sum(w > 1 for w in winners)} of {trials} trials had several winners"


def test_a_held_lock_is_refused_even_while_its_record_is_rewritten(tmp_path):
    from ltx_trainer.training.run_lock import RunLock

    with RunLock(tmp_path) as held:
        (tmp_path / LOCK_NAME).write_text("")  # the record as a racing run may see it mid-write
        with pytest.raises(OutputDirLocked, match="in use by another training"):
            RunLock(tmp_path).acquire()
        assert held.held
    assert not (tmp_path / LOCK_NAME).exists()


# -- damaged data and a full disk: one line, exit 1 --------------------------------------------------------
def _copy_data(data_root: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "data" / ".precomputed"
    shutil.copytree(data_root, copy)
    return copy


DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "zeroed": lambda p: p.write_bytes(bytes(p.stat().st_size)),
    "wrong key": lambda p: __import__("safetensors.torch").torch.save_file({"latent": torch.zeros(1)}, str(p)),
}


@pytest.mark.parametrize(("damage", "workers"), [(d, 0) for d in sorted(DAMAGE)] + [("wrong key", 1)])
def test_a_damaged_sample_is_one_line_naming_the_file(damage, workers, checkpoint, data_root, tmp_path, capsys):
    data = _copy_data(data_root, tmp_path)
    bad = sorted((data / "latents").rglob("*.safetensors"))[1]
    DAMAGE[damage](bad)
    raw = training_config(checkpoint, data, tmp_path / "out", optimization={"steps": 4})
    raw["data"]["num_dataloader_workers"] = workers
    assert train_cli.main([str(_write_yaml(raw, tmp_path / "config.yaml")), "--disable-progress-bars"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "re-run process_dataset" in err, err


def test_a_full_disk_during_a_save_is_one_line_and_keeps_nothing_partial(
    checkpoint, data_root, tmp_path, monkeypatch, capsys
):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    real_save = torch.save

    def full_disk_at_step_2(state, path, *a, **k):
        if isinstance(state, dict) and state.get("global_step") == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(state, path, *a, **k)

    monkeypatch.setattr(ckpt.torch, "save", full_disk_at_step_2)
    assert train_cli.main([str(_write_yaml(raw, tmp_path / "config.yaml")), "--disable-progress-bars"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left" in err and "lora_weights_step_00001" in err, err
    folder = tmp_path / "out" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == [ckpt.weights_name("lora", 1), ckpt.state_name(1)]
    assert _leftovers(tmp_path / "out") == []


# What torch.save raises when the disk fills during a write (its stream writer checks positions, not errno).
TORCH_SHORT_WRITE = "[enforce fail at inline_container.cc:671] . unexpected pos 704 vs 598"


def test_torch_s_own_full_disk_error_during_a_save_is_one_line_and_resume_works(
    checkpoint, data_root, tmp_path, monkeypatch, capsys
):
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 3}, **RESUMABLE)
    real_save = torch.save

    def full_disk_at_step_2(state, path, *a, **k):
        if isinstance(state, dict) and state.get("global_step") == 2:
            Path(path).write_bytes(b"PK\x03\x04 half a state")  # what the writer got out before the disk filled
            raise RuntimeError(TORCH_SHORT_WRITE)
        return real_save(state, path, *a, **k)

    monkeypatch.setattr(ckpt.torch, "save", full_disk_at_step_2)
    config = _write_yaml(raw, tmp_path / "config.yaml")
    assert train_cli.main([str(config), "--disable-progress-bars"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left" in err and "lora_weights_step_00001" in err, err
    folder = tmp_path / "out" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == [ckpt.weights_name("lora", 1), ckpt.state_name(1)]
    assert _leftovers(tmp_path / "out") == []

    monkeypatch.setattr(ckpt.torch, "save", real_save)
    raw["model"]["load_checkpoint"] = str(folder)
    history = Trainer(parse_config(raw), disable_progress_bars=True).train().history
    assert [r.step for r in history] == [2, 3]


# -- small ones -----------------------------------------------------------------------------------------
def test_the_audio_vae_path_field_is_refused_by_name(checkpoint, data_root, tmp_path):
    # model.video_vae_path is read (the VAE's compression factors); with a single file, model.audio_vae_path
    # would not be the audio VAE validation uses.
    from ltx_trainer.config import ConfigError

    raw = training_config(checkpoint, data_root, tmp_path)
    raw["model"]["video_vae_path"] = str(checkpoint)
    raw["model"]["audio_vae_path"] = str(checkpoint)
    with pytest.raises(ConfigError, match=r"model\.audio_vae_path: only for the LTX-2.5 split set"):
        parse_config(raw)
    del raw["model"]["audio_vae_path"]
    assert parse_config(raw).model.video_vae_path == checkpoint


def test_cpu_bf16_training_writes_0644_files_and_warns_nothing(checkpoint, data_root, tmp_path):
    # A process of its own: accelerate fixes the mixed precision once per process.
    raw = training_config(checkpoint, data_root, tmp_path / "out", optimization={"steps": 1})
    raw["acceleration"] = {"mixed_precision_mode": "bf16"}
    config = _write_yaml(raw, tmp_path / "config.yaml")
    run = subprocess.run(
        [sys.executable, "-W", "always", "-m", "ltx_trainer.train", str(config), "--disable-progress-bars"],
        capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "always"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Mismatch dtype" not in run.stderr and "UserWarning" not in run.stderr, run.stderr
    os.umask(umask := os.umask(0o022))
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert set(modes.values()) == {oct(0o666 & ~umask)}, modes


def test_rms_norm_over_a_lower_precision_input_is_the_fallback_bit_for_bit():
    from ltx_core.model.transformer.attention import RMSNorm

    norm = RMSNorm(64, eps=1e-6)
    torch.nn.init.normal_(norm.weight)
    x = (torch.randn(2, 7, 64) * 3).bfloat16()
    with pytest.warns(UserWarning, match="Mismatch dtype"):
        expected = torch.nn.functional.rms_norm(x, (64,), norm.weight, 1e-6)
    assert torch.equal(norm(x), expected) and norm(x).dtype == torch.bfloat16


def test_help_is_complete_when_not_in_a_terminal():
    result = subprocess.run(
        [sys.executable, "-m", "ltx_trainer.process_dataset", "--help"], capture_output=True, text=True, check=True
    )
    assert "…" not in result.stdout  # rich cut long option names at 80 columns when piped
    assert "--resolution-buckets" in result.stdout and "--load-text-encoder-in-8bit" in result.stdout


def test_the_skill_resumes_into_the_same_log_and_says_how_to_stop():
    from skill_lint import code_lines

    text = (Path(__file__).parents[3] / ".claude/skills/train-model/phases/8-launch-monitor.md").read_text()
    resume = text[text.index("## Monitor-only re-entry and resume") :]
    launches = [line for line in code_lines(resume) if "ltx_trainer.train" in line]
    assert launches and all(">> <RUN>/logs/train.log" in line for line in launches), launches
    assert "kill -TERM $(cat <RUN>/logs/train.pid)" in code_lines(text)


def test_a_full_disk_is_recognised_through_safetensors_too():
    from safetensors import SafetensorError

    from ltx_core.write_errors import is_disk_full

    rust = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
    assert is_disk_full(SafetensorError(rust))
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(SafetensorError("Error while serializing: header too large"))
    assert is_disk_full(RuntimeError(TORCH_SHORT_WRITE))
    assert is_disk_full(RuntimeError(f"{TORCH_SHORT_WRITE[:42]} PytorchStreamWriter failed writing file "
                                            "data/0: file write failed"))  # fmt: skip
    assert not is_disk_full(RuntimeError("[enforce fail at inline_container.cc:300] . file not found"))


# -- resume is bit-exact whatever draws random numbers -----------------------------------------------------
# Every random option a config can switch on: LoRA dropout (torch's global generator, inside peft), condition
# and reference probabilities, both sigma samplers, gradient checkpointing (its recompute replays dropout),
# gradient accumulation. (Every DataLoader iterator draws its workers' base seed, with or without workers;
# the workers themselves draw nothing.)
RANDOM_OPTIONS = {
    "dropout, conditions, reference, checkpointing": {
        "training_strategy": {
            "name": "flexible",
            "video": {
                "latents_dir": "latents",
                "conditions": [
                    {"type": "reference", "latents_dir": "reference_latents", "probability": 0.5},
                    {"type": "first_frame", "probability": 0.5},
                ],
            },
        },
        "optimization": {"enable_gradient_checkpointing": True},
    },
    "dropout, audio prefix, uniform sigmas, accumulation": {
        "training_strategy": {
            "name": "flexible",
            "audio": {
                "latents_dir": "audio_latents",
                "conditions": [{"type": "prefix", "temporal_boundary": 2, "probability": 0.5}],
            },
        },
        "flow_matching": {"timestep_sampling_mode": "uniform"},
        "optimization": {"gradient_accumulation_steps": 2, "batch_size": 1},
    },
}


def _random_config(checkpoint: Path, data_root: Path, out: Path, options: str, steps: int) -> dict:
    raw = training_config(
        checkpoint, data_root, out, optimization={"steps": steps}, **RESUMABLE,
        lora={"rank": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["to_q", "to_k", "to_v", "to_out.0"]},
    )  # fmt: skip
    for section, values in RANDOM_OPTIONS[options].items():
        raw[section] = values if section == "training_strategy" else {**raw.get(section, {}), **values}
    return raw


def _lora_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


def _differing(a: Path, b: Path) -> list[str]:
    ta, tb = _lora_tensors(a), _lora_tensors(b)
    assert ta.keys() == tb.keys()
    return [k for k in ta if not torch.equal(ta[k], tb[k])]


@pytest.mark.slow
@pytest.mark.parametrize("options", sorted(RANDOM_OPTIONS))
def test_resume_from_every_step_is_bit_exact_with_every_random_option(options, checkpoint, data_root, tmp_path):
    """The uninterrupted run also draws from torch's global generator between steps (as validation or any
    other library may): no training draw may depend on it. Every checkpoint is then resumed to the end,
    and every tensor of the final LoRA must equal the uninterrupted run's, bit for bit."""
    steps = 3
    straight = _random_config(checkpoint, data_root, tmp_path / "straight", options, steps)
    Trainer(parse_config(straight), disable_progress_bars=True).train(on_step=lambda _: torch.rand(3))
    saved = tmp_path / "straight" / "checkpoints"
    final = saved / ckpt.weights_name("lora", steps)
    for stop in range(1, steps):
        raw = _random_config(checkpoint, data_root, tmp_path / f"resumed{stop}", options, steps)
        raw["model"]["load_checkpoint"] = str(saved / ckpt.weights_name("lora", stop))
        torch.rand(stop)  # the global generator in another state than at any save
        history = Trainer(parse_config(raw), disable_progress_bars=True).train().history
        assert [r.step for r in history] == list(range(stop + 1, steps + 1))
        resumed = tmp_path / f"resumed{stop}" / "checkpoints" / ckpt.weights_name("lora", steps)
        assert _differing(final, resumed) == [], f"resumed from step {stop}"


# -- a stop ends with 128 + the signal, every time ---------------------------------------------------------
# A native component crashing in the interpreter's teardown (what made 5 of 15 stops end with 139): the
# training must leave before teardown once the stop is recorded.
CRASH_AT_TEARDOWN = (
    "import atexit, ctypes, runpy; atexit.register(ctypes.string_at, 0); "
    "runpy.run_module('ltx_trainer.train', run_name='__main__', alter_sys=True)"
)


@pytest.mark.slow
def test_a_real_sigterm_at_a_random_step_exits_143_and_resumes_bit_exact(checkpoint, data_root, tmp_path):
    """The training process (with a teardown that would crash) is stopped by SIGTERM after a random step;
    it exits 143 with the resume line, and resuming it gives the uninterrupted run's LoRA bit for bit (LoRA
    dropout and random conditions on)."""
    import random

    steps, stop = 8, random.Random().randint(2, 4)
    options = "dropout, conditions, reference, checkpointing"
    raw = _random_config(checkpoint, data_root, tmp_path / "out", options, steps)
    raw["checkpoints"]["interval"] = 2
    process = subprocess.Popen(
        [sys.executable, "-c", CRASH_AT_TEARDOWN, str(_write_yaml(raw, tmp_path / "config.yaml")),
         "--disable-progress-bars", "--log-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(process, f"step {stop}/{steps}")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, (stop, process.returncode, stderr)
    assert stderr.strip().splitlines()[-1].startswith("error: stopped by SIGTERM;"), stderr
    assert _leftovers(tmp_path / "out") == []

    folder = tmp_path / "out" / "checkpoints"
    if ckpt.latest_complete(folder) is not None:  # a stop before the first save starts over, as the line says
        raw["model"]["load_checkpoint"] = str(folder)
    Trainer(parse_config(raw), disable_progress_bars=True).train()
    straight = _random_config(checkpoint, data_root, tmp_path / "straight", options, steps)
    straight["checkpoints"]["interval"] = 2
    Trainer(parse_config(straight), disable_progress_bars=True).train()
    final = ckpt.weights_name("lora", steps)
    assert _differing(tmp_path / "straight" / "checkpoints" / final, folder / final) == [], f"stopped at {stop}"


@pytest.mark.slow
def test_fifteen_stops_at_random_moments_each_end_as_the_signal(checkpoint, data_root, tmp_path, monkeypatch, capsys):
    """SIGTERM or SIGINT at a random moment of a run (building the models, a step, a save): `main` returns
    128 + the signal with the resume line, releases the lock and leaves only complete checkpoints."""
    import random
    import threading

    rng = random.Random()
    late: list[int] = []
    test_handler = signal.signal(signal.SIGTERM, lambda signum, frame: late.append(signum))
    signal.signal(signal.SIGINT, test_handler)  # a signal after `main` returned lands here, not in pytest

    def stop_later(sig: int) -> None:
        # Once `main` has put its handler in place (a signal before that would be the default's to handle).
        deadline = time.monotonic() + 120
        while signal.getsignal(sig) is test_handler and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 2.5))
        os.kill(os.getpid(), sig)

    try:
        for trial in range(15):
            out = tmp_path / f"out{trial}"
            raw = training_config(checkpoint, data_root, out, optimization={"steps": 500}, **RESUMABLE)
            config = _write_yaml(raw, tmp_path / f"config{trial}.yaml")
            sig = rng.choice((signal.SIGTERM, signal.SIGINT))
            timer = threading.Thread(target=stop_later, args=(sig,))
            timer.start()
            try:
                code = train_cli.main([str(config), "--disable-progress-bars"])
            finally:
                timer.join()
            err = capsys.readouterr().err.strip()
            assert not late and code == 128 + sig, (trial, code, late, err)
            assert err.splitlines()[-1].startswith(f"error: stopped by {signal.Signals(sig).name};"), err
            assert _leftovers(out) == []
            folder = out / "checkpoints"
            assert ckpt.latest_weights(folder) == ckpt.latest_complete(folder)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


def test_keyed_global_draws_depend_on_the_key_only_and_leave_the_generator_as_it_was():
    from ltx_trainer.training.draws import keyed_global_rng

    cpu = torch.device("cpu")
    before = torch.get_rng_state()
    with keyed_global_rng(7, 3, 0, cpu):
        first = torch.nn.functional.dropout(torch.ones(64), 0.5)
    assert torch.equal(torch.get_rng_state(), before)
    torch.rand(5)  # whatever drew in between
    with keyed_global_rng(7, 3, 0, cpu):
        assert torch.equal(torch.nn.functional.dropout(torch.ones(64), 0.5), first)
    for other in ((7, 4, 0), (7, 3, 1), (8, 3, 0)):  # another micro-step, process or seed
        with keyed_global_rng(*other, cpu):
            assert not torch.equal(torch.nn.functional.dropout(torch.ones(64), 0.5), first), other
