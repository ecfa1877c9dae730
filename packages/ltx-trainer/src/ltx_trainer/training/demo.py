"""The demo training path: `python -m ltx_trainer.train --demo [--demo-dir DIR]`.

Runs the steps of a real training on the tiny random demo models (`ltx_pipelines.demo`), on
the CPU and without downloads: synthetic clips (a white square sliding over a coloured wall, a sine
tone; one clip has no audio track) -> `process_dataset` -> the `t2v_lora.yaml` example config,
patched like the train-model skill patches it -> a short LoRA training with checkpoints and a
validation sample. The demo checkpoint holds every component a real single-file checkpoint holds,
so it stands in for the dev checkpoint (`<MODEL>`) and its Gemma folder for `<GEMMA>` wherever the
trainer, the pipelines or the skill ask for them; the outputs are noise, the code paths are real.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

logger = logging.getLogger(__name__)

EXAMPLE_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "t2v_lora.yaml"
DEFAULT_DEMO_DIR = Path("outputs") / "demo-training"
DEMO_BUCKET = "64x64x9"
DEMO_TRIGGER = "sks"
DEMO_CAPTION = "a white square slides over a {colour} wall, a steady {hz} Hz tone hums"
DEMO_FPS = 8.0
DEMO_CLIPS = (("red", (200, 40, 40), 330.0), ("blue", (40, 60, 200), 440.0), ("green", (40, 160, 60), 550.0))
"""Name, wall colour, tone pitch per clip; a last clip, grey and without a sound track, shows how a
clip without audio is kept and trained video-only."""

# What the demo changes in the example config, beyond paths: a tiny bucket, a few CPU-sized steps, a
# learning rate at which the tiny model's loss visibly falls within them, one denoising step in validation.
DEMO_PATCHES: dict[str, Any] = {
    "lora.rank": 8,
    "lora.alpha": 8,
    "optimization.steps": 20,
    "optimization.learning_rate": 1e-3,
    "acceleration.mixed_precision_mode": "no",
    "data.num_dataloader_workers": 0,
    "validation.video_dims": [64, 64, 9],
    "validation.inference_steps": 1,
    "validation.interval": 20,
    "validation.skip_initial_validation": True,
    "checkpoints.interval": 10,
    "checkpoints.precision": "float32",
}


@dataclass(frozen=True)
class DemoRun:
    folder: Path
    checkpoint: Path
    gemma_root: Path
    dataset: Path
    precomputed: Path
    config: Path
    output_dir: Path


def demo_run_at(folder: Path) -> DemoRun:
    """Where everything of a demo run under `folder` lives (the models stay in the shared demo cache)."""
    from ltx_pipelines.demo import default_demo_dir, demo_assets_at

    assets = demo_assets_at(default_demo_dir())
    return DemoRun(
        folder=folder,
        checkpoint=assets.checkpoint,
        gemma_root=assets.gemma_root,
        dataset=folder / "dataset" / "dataset.json",
        precomputed=folder / "dataset" / ".precomputed",
        config=folder / "config.yaml",
        output_dir=folder / "outputs",
    )


def write_demo_clips(dataset_dir: Path) -> Path:
    """Three 2 s clips with a tone and one without a sound track, and their dataset file."""
    from ltx_pipelines.io import write_video

    frames, size, square = round(2 * DEMO_FPS), 64, 16
    rows = []
    specs = [*DEMO_CLIPS, ("grey", (128, 128, 128), None)]
    for name, colour, hz in specs:
        video = torch.empty(frames, size, size, 3, dtype=torch.uint8)
        video[:] = torch.tensor(colour, dtype=torch.uint8)
        for i in range(frames):  # the square moves 3 pixels a frame
            x = 3 * i % (size - square)
            video[i, (size - square) // 2 : (size + square) // 2, x : x + square] = 255
        audio, rate = None, None
        if hz is not None:
            rate = 48_000
            t = torch.arange(round(frames / DEMO_FPS * rate), dtype=torch.float32) / rate
            audio = (0.4 * torch.sin(2 * math.pi * hz * t)).expand(2, -1).contiguous()
        path = dataset_dir / "videos" / f"{name}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_video(path, video, fps=DEMO_FPS, audio=audio, audio_sample_rate=rate, overwrite=True)
        caption = DEMO_CAPTION.format(colour=name, hz=int(hz)) if hz else f"a white square slides over a {name} wall"
        rows.append({"video": f"videos/{name}.mp4", "caption": caption})
    dataset = dataset_dir / "dataset.json"
    dataset.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return dataset


def _patch(config: dict[str, Any], patches: Mapping[str, Any]) -> dict[str, Any]:
    for dotted, value in patches.items():
        *parents, last = dotted.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return config


def demo_config(run: DemoRun, **patches: Any) -> dict[str, Any]:
    """The `t2v_lora.yaml` example config with the demo's paths and `DEMO_PATCHES` (then `patches`)."""
    config = yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    paths = {
        "model.model_path": str(run.checkpoint),
        "model.text_encoder_path": str(run.gemma_root),
        "data.preprocessed_data_root": str(run.precomputed),
        "output_dir": str(run.output_dir),
        "validation.samples": [{"prompt": f"{DEMO_TRIGGER} {DEMO_CAPTION.format(colour='red', hz=330)}"}],
    }
    return _patch(config, {**paths, **DEMO_PATCHES, **patches})


def prepare_demo(folder: Path, **patches: Any) -> DemoRun:
    """Build (or reuse) the demo models, write the clips, preprocess them and write `config.yaml`."""
    from ltx_pipelines.demo import ensure_demo_assets
    from ltx_trainer.preprocessing.buckets import parse_buckets
    from ltx_trainer.preprocessing.plan import PreprocessSettings
    from ltx_trainer.preprocessing.run import preprocess_dataset

    run = demo_run_at(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        # The demo writes clips, latents and checkpoints: never into a folder that holds anything already.
        raise ValueError(f"the demo folder {str(folder)!r} is not empty; pass another --demo-dir or delete it")
    ensure_demo_assets()
    write_demo_clips(run.dataset.parent)
    settings = PreprocessSettings(
        model_path=run.checkpoint, text_encoder_path=run.gemma_root,
        resolution_buckets=tuple(parse_buckets(DEMO_BUCKET)), lora_trigger=DEMO_TRIGGER, device="cpu",
    )  # fmt: skip
    preprocess_dataset(run.dataset, settings).print()
    run.config.write_text(yaml.safe_dump(demo_config(run, **patches), sort_keys=False), encoding="utf-8")
    return run


def describe(run: DemoRun) -> str:
    """What a demo run left, and the paths to use as the skill's `<MODEL>` and `<GEMMA>`."""
    return "\n".join([
        f"demo run: {run.folder}",
        f"dataset: {run.dataset} (preprocessed: {run.precomputed})",
        f"config: {run.config}",
        f"checkpoints: {run.output_dir / 'checkpoints'}",
        f"samples: {run.output_dir / 'samples'}",
        f"model (use as <MODEL>, the dev checkpoint): {run.checkpoint}",
        f"gemma (use as <GEMMA>): {run.gemma_root}",
    ])  # fmt: skip


def run_demo_training(folder: Path, *, disable_progress_bars: bool = False, log_every: int = 1) -> DemoRun:
    """Prepare the demo, then train it with `python -m ltx_trainer.train`'s trainer."""
    from ltx_trainer.config import load_config
    from ltx_trainer.training.trainer import Trainer

    run = prepare_demo(folder)
    config = load_config(run.config)
    Trainer(config, disable_progress_bars=disable_progress_bars, log_every=log_every).train()
    return run


def demo_main(folder: str | Path, *, disable_progress_bars: bool, log_every: int) -> int:
    """`train --demo`: the run, then where its parts are; exit status as `train` gives it."""
    from ltx_trainer.training.checkpoints import ResumeError
    from ltx_trainer.training.trainer import TrainingDiverged

    try:
        run = run_demo_training(Path(folder), disable_progress_bars=disable_progress_bars, log_every=log_every)
    except (ValueError, ResumeError, TrainingDiverged) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(describe(run))
    return 0
