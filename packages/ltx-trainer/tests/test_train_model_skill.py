"""The train-model agent skill names only what exists: every command it runs parses its flags, every
config field is in the schema, every path exists, and every log pattern the monitor phase greps for
matches a line of a real (tiny) training run's log. Altered copies of the skill are reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from skill_lint import HelpCache, extract, field_path_exists, lint_skill, skill_texts
from training_data import training_config, write_dataset


def run_logged(args: list[str], log: Path) -> int:
    """Run a command with stdout and stderr into `log`, as the skill's launch line does."""
    with log.open("w") as out:
        return subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=300).returncode


@pytest.fixture(scope="module")
def trainer_log(tiny_models, tmp_path_factory) -> list[str]:
    """Lines of a real 2-step run (checkpoints, a validation sample) and of a run stopped by a config error."""
    root = tmp_path_factory.mktemp("skill-log")
    data_root = write_dataset(root / "data", num_samples=2)
    config = training_config(
        tiny_models.checkpoint, data_root, root / "out",
        model={"model_path": str(tiny_models.checkpoint), "text_encoder_path": str(tiny_models.gemma_root)},
        optimization={"steps": 2, "batch_size": 1},
        validation={"interval": 2, "inference_steps": 1, "video_dims": [32, 32, 9], "skip_initial_validation": True,
                    "samples": [{"prompt": "sks a square, a tone hums"}]},
        checkpoints={"interval": 1},
    )  # fmt: skip
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    train = [sys.executable, "-m", "ltx_trainer.train"]
    assert run_logged([*train, str(root / "config.yaml"), "--disable-progress-bars"], root / "train.log") == 0
    config["data"]["preprocessed_data_root"] = str(root / "missing")
    (root / "bad.yaml").write_text(yaml.safe_dump(config))
    assert run_logged([*train, str(root / "bad.yaml"), "--disable-progress-bars"], root / "bad.log") == 2
    return (root / "train.log").read_text().splitlines() + (root / "bad.log").read_text().splitlines()


@pytest.fixture(scope="module")
def helps() -> HelpCache:
    return HelpCache()


def test_the_skill_names_only_commands_flags_fields_paths_and_log_lines_that_exist(trainer_log, helps):
    problems = lint_skill(skill_texts(), trainer_log, helps)
    assert problems == []


def test_the_extraction_finds_the_skill_s_commands_fields_and_patterns():
    found = extract(skill_texts())
    targets = {inv.target for inv in found.invocations}
    expected = {"ltx_trainer.split_scenes", "ltx_trainer.caption_videos", "ltx_trainer.serve_captioner",
                "ltx_trainer.process_dataset", "ltx_trainer.decode_latents", "ltx_trainer.train",
                "ltx_pipelines.ti2vid_one_stage", ".claude/skills/train-model/scripts/split_holdout.py",
                ".claude/skills/train-model/scripts/status.py",
                ".claude/skills/train-model/scripts/check_precomputed.py"}  # fmt: skip
    assert expected <= targets
    assert {"optimization.learning_rate", "model.load_checkpoint", "data.preprocessed_data_root"} <= found.field_paths
    assert len(found.grep_patterns) >= 4
    assert "packages/ltx-trainer/configs/accelerate/ddp.yaml" in found.paths
    assert {"ltx_trainer.config", "ltx_trainer.compute_reference"} <= found.modules


def _altered(old: str, new: str) -> dict[str, str]:
    texts = skill_texts()
    hits = [name for name, text in texts.items() if old in text]
    assert hits, f"{old!r} is not in the skill any more; pick another text to alter"
    return {name: text.replace(old, new) for name, text in texts.items()}


@pytest.mark.parametrize(
    ("old", "new", "reported"),
    [
        ("--filter-shorter-than <F>", "--filter-shorter <F>", "split_scenes: unknown flag --filter-shorter"),
        ("--lora-trigger <TRIGGER>", "--trigger <TRIGGER>", "ltx_trainer.process_dataset: unknown flag --trigger"),
        ("`--print-cmd`", "`--print-command`", "flag --print-command is not accepted"),
        ("`optimization.learning_rate`", "`optimization.lr`", "config field optimization.lr is not in"),
        ("| `output_dir` |", "| `outputs_dir` |", "config field outputs_dir is not in"),
        ("configs/accelerate/ddp.yaml", "configs/accelerate/dp.yaml", "path packages/ltx-trainer/configs/accelerate/dp.yaml"),  # noqa: E501
        ("-m ltx_trainer.split_scenes", "-m ltx_trainer.split_scene", "command 'ltx_trainer.split_scene' does not run"),
        ("'^validation sample '", "'^validation samples '", "log pattern '^validation samples '"),
        ("`ltx_trainer.compute_reference`", "`ltx_trainer.compute_refs`", "module ltx_trainer.compute_refs"),
    ],
)
def test_an_altered_skill_is_reported(trainer_log, helps, old, new, reported):
    problems = lint_skill(_altered(old, new), trainer_log, helps)
    assert any(reported in p for p in problems), problems


def test_field_paths_follow_nested_and_union_types():
    assert field_path_exists("training_strategy.video.conditions")
    assert field_path_exists("validation.samples.prompt")
    assert not field_path_exists("training_strategy.video.prompt")


def _skill_script(name: str):
    import importlib.util

    from skill_lint import SKILL_DIR

    spec = importlib.util.spec_from_file_location(f"skill_{name}", SKILL_DIR / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _step(step: int, seconds: float, total: int = 1000) -> str:
    return f"step {step}/{total} loss 0.{step:06d} lr 1.000e-04 step_time {seconds:.3f}s peak_mem 100.0MB"


def test_status_eta_comes_from_steady_state_steps_only(tmp_path):
    status = _skill_script("status")
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    # Step 1 pays for compilation, step 60 for a validation pass: neither may move the ETA.
    lines = [_step(1, 40.0)] + [_step(s, 90.0 if s == 60 else 2.0) for s in range(20, 101, 20)]
    lines += ["saved /x/checkpoints/lora_weights_step_00100.safetensors"]
    lines += ["validation sample /x/samples/step_000100_0.mp4"]
    (run / "logs" / "train.log").write_text("\n".join(lines) + "\n")
    block = status.format_status(status.read_status(run, run / "logs" / "train.log", run / "outputs"))
    assert "Step: 100/1000 (10%)" in block
    assert "Step time: 2.000s | ETA: 30m" in block  # (1000 - 100) steps x 2 s
    assert block.splitlines()[0] == "Run: run (stopped)"
    assert "Latest checkpoint: lora_weights_step_00100.safetensors" in block
    assert "Latest sample: step_000100_0.mp4" in block


def test_status_says_measuring_only_before_the_first_steady_step(tmp_path):
    status = _skill_script("status")
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "train.log"
    log.write_text(_step(1, 40.0) + "\n")
    block = status.format_status(status.read_status(tmp_path, log, tmp_path))
    assert "Step time: measuring | ETA: measuring" in block
    assert "Latest checkpoint: none" in block
    # A short run with --log-every 20: step 20 is the first steady step and already gives the rate.
    log.write_text(_step(1, 40.0, total=60) + "\n" + _step(20, 2.0, total=60) + "\n")
    block = status.format_status(status.read_status(tmp_path, log, tmp_path))
    assert "Step time: 2.000s | ETA: 1m" in block  # (60 - 20) steps x 2 s = 80 s


def test_split_holdout_is_seeded_and_never_overwrites_silently(tmp_path, capsys):
    import json

    split = _skill_script("split_holdout")
    rows = [{"video": f"videos/{i}.mp4", "caption": f"clip {i}"} for i in range(20)]
    (tmp_path / "captions.json").write_text(json.dumps(rows))
    assert split.main([str(tmp_path / "captions.json")]) == 0
    held = [json.loads(x) for x in (tmp_path / "holdout.jsonl").read_text().splitlines()]
    train = json.loads((tmp_path / "dataset.json").read_text())
    assert len(held) == 2 and len(train) == 18 and not {r["video"] for r in held} & {r["video"] for r in train}
    assert split.main([str(tmp_path / "captions.json")]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert split.main([str(tmp_path / "captions.json"), "--overwrite", "--seed", "7"]) == 0
    assert [json.loads(x) for x in (tmp_path / "holdout.jsonl").read_text().splitlines()] != held
    assert split.main([str(tmp_path / "captions.json"), "--overwrite", "--count", "20"]) == 2
    assert "accepted 0 to 19" in capsys.readouterr().err


def test_the_skill_s_default_workspace_is_ignored_by_git():
    """Phase 0 creates `./projects/` in the repository without asking: runs must never show up as changes."""
    from skill_lint import REPO_ROOT, SKILL_DIR

    assert "`./projects/`" in (SKILL_DIR / "phases" / "0-setup.md").read_text()
    ignored = subprocess.run(["git", "check-ignore", "-q", "projects/t2v-x/config.yaml"], cwd=REPO_ROOT)
    assert ignored.returncode == 0


def test_status_loss_drop_compares_the_first_and_last_logged_steps(tmp_path, capsys):
    status = _skill_script("status")
    (tmp_path / "logs").mkdir()
    lines = [f"step {s}/50 loss {3.0 - 0.02 * s:.6f} lr 1e-3 step_time 1.0s peak_mem 1.0MB" for s in range(1, 51)]
    (tmp_path / "logs" / "train.log").write_text("\n".join(lines) + "\n")
    assert status.main([str(tmp_path), "--loss-drop", "10"]) == 0
    drop = capsys.readouterr().out.strip().splitlines()[-1]
    # first 10: mean of 3 - 0.02 s for s = 1..10 = 2.89; last 10 (s = 41..50): 2.09
    assert drop == "Loss drop: 2.8900 -> 2.0900 (27.7%, first and last 10 steps)"
    assert status.main([str(tmp_path), "--loss-drop", "30"]) == 0
    assert "needs 60 logged steps, the log has 50" in capsys.readouterr().out


def test_probe_reports_lengths_frame_count_and_audio_tracks_with_pyav_and_torch(tmp_path, make_clip, monkeypatch):
    """The issue's case: 2 s clips at 24 fps have 48 frames, so the default bucket's 49 cannot be used; the
    probe proposes 41. No ffprobe or nvidia-smi on PATH: the facts come from PyAV and torch."""
    probe = _skill_script("probe")
    make_clip(tmp_path / "clips" / "a.mp4", frames=48, fps=24.0)
    make_clip(tmp_path / "clips" / "b.mp4", frames=72, fps=24.0, audio=False)
    (tmp_path / "clips" / "notes.txt").write_text("not a clip")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    lines = probe.report(*probe.probe_clips(probe.find_clips([tmp_path / "clips"])), tmp_path, 49)
    assert lines[0] == "clips: 2 (.mp4: 2)"
    assert "shortest clip: a.mp4 2.00 s, 48 frames at 24.00 fps" in lines
    assert "frame count: 41 (largest 8k+1 every clip reaches is 41; at most 49)" in lines
    assert "audio: 1 of 2 clips have an audio track; without: b.mp4" in lines
    assert any(line.startswith("gpu") for line in lines) and lines[-1].startswith("disk: ")
    assert [probe.largest_frame_count(n, 49) for n in (0, 1, 8, 9, 48, 49, 500)] == [0, 1, 1, 9, 41, 49, 49]


def test_status_of_a_finished_resumed_run_does_not_show_the_earlier_stop(tmp_path):
    """Issue 32.4: the first run was stopped by SIGTERM, the resumed one (same log) finished; the stop line is
    history, not the run's state. An error after the last step still shows."""
    status = _skill_script("status")
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "train.log"
    stopped = [_step(s, 1.0, total=40) for s in (10, 20)]
    stopped += ["error: stopped by SIGTERM; resume with the same command (checkpoints.interval kept step 20)"]
    resumed = [_step(s, 1.0, total=40) for s in (30, 40)] + ["saved /x/checkpoints/lora_weights_step_00040.safetensors"]
    log.write_text("\n".join(stopped + resumed) + "\n")
    block = status.format_status(status.read_status(tmp_path, log, tmp_path))
    assert block.splitlines()[0] == f"Run: {tmp_path.name} (finished)"
    assert "Error:" not in block
    log.write_text("\n".join(stopped) + "\n")
    block = status.format_status(status.read_status(tmp_path, log, tmp_path))
    assert "Error: stopped by SIGTERM" in block and "(stopped)" in block


def test_probe_reports_each_resolution_and_orientation_and_buckets_that_fit_them(tmp_path, make_clip, monkeypatch):
    """Issue 32.4: the probe names each clip's resolution and orientation, and proposes one bucket per orientation,
    so that a portrait clip is not centre-cropped into a landscape bucket."""
    probe = _skill_script("probe")
    make_clip(tmp_path / "clips" / "wide-1.mp4", frames=17, height=64, width=96)
    make_clip(tmp_path / "clips" / "wide-2.mp4", frames=17, height=64, width=96)
    make_clip(tmp_path / "clips" / "tall.mp4", frames=17, height=96, width=64, audio=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    lines = probe.report(*probe.probe_clips(probe.find_clips([tmp_path / "clips"])), tmp_path, 49)
    assert "resolution: 96x64 landscape, 2 clips: wide-1.mp4, wide-2.mp4" in lines
    assert "resolution: 64x96 portrait, 1 clip: tall.mp4" in lines
    buckets = next(line for line in lines if line.startswith("buckets: "))
    assert buckets.startswith("buckets: 960x544x17;544x960x17 (one per orientation: landscape 2, portrait 1")
    # Every proposed bucket is one the trainer parses, and each clip's chosen bucket has its orientation.
    from ltx_trainer.preprocessing.buckets import choose_bucket, parse_buckets

    proposed = parse_buckets(buckets.split()[1])
    for clip in probe.probe_clips(probe.find_clips([tmp_path / "clips"]))[0]:
        bucket = choose_bucket(proposed, clip.width, clip.height, clip.frames)
        assert (bucket.width > bucket.height) == (clip.width > clip.height), clip.path.name


def test_every_generation_has_its_commands_in_the_skill():
    """Issue 32.4: LTX-2.5 preprocessing, training and validation work, so the skill shows their commands: the
    `process_dataset` lines of phases 6 and 7 with the VAE files of a 2.5 set, and a phase-9 render on component
    files (`--gemma-root` refuses the packed Gemma 4 file); the skill and the trainer README name LTX-2.5."""
    from skill_lint import REPO_ROOT, code_lines

    texts = skill_texts()
    for phase in ("phases/6-sanity-autotune.md", "phases/7-preprocess.md"):
        commands = [line for line in code_lines(texts[phase]) if "ltx_trainer.process_dataset" in line]
        assert any("--video-vae-path <VIDEO_VAE>" in c and "--audio-vae-path <AUDIO_VAE>" in c for c in commands)
    renders = [line for line in code_lines(texts["phases/9-post-train-validate.md"]) if "ltx_pipelines." in line]
    assert any("--transformer-path <MODEL>" in r and "--text-encoder-path <GEMMA>" in r for r in renders)
    assert "<VIDEO_VAE>" in texts["SKILL.md"] and "LTX-2.5" in texts["SKILL.md"].split("\n---", 1)[0]
    readme = (REPO_ROOT / "packages" / "ltx-trainer" / "README.md").read_text()
    assert "LTX-2.5" in readme.split("\n\n", 2)[1]


def test_the_sanity_gate_sits_below_the_drops_the_skill_measured():
    """Issue 32.4: the phase-6 gate failed on the demo path at 3.3% while the skill promised 10%. The skill now
    lists the drops measured with its own settings on the demo (and the command that measures them), and the
    gate is at most half the smallest of them."""
    import math
    import re

    text = skill_texts()["phases/6-sanity-autotune.md"]
    assert "uv run python benchmarks/skill_sanity_gate.py" in text
    rows = re.findall(r"^\| (\w+) clip \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)% \|$", text, re.M)
    assert len(rows) >= 3, "the measured runs"
    drops = []
    for _, _, first, last, drop in rows:
        measured = 100 * (float(first) - float(last)) / float(first)
        assert abs(measured - float(drop)) < 0.06, (first, last, drop)
        drops.append(float(drop))
    gate = int(re.search(r"at least \*\*(\d+)%\*\* below", text).group(1))
    assert f"smallest measured drop is {min(drops):.1f}%" in text
    assert 0 < gate <= math.floor(min(drops) / 2)
    assert f"loss drop of at least {gate}%" in skill_texts()["references/plan-template.md"]
