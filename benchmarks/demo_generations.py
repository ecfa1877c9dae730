"""Every pipeline's `--demo` on the LTX-2.3 and the LTX-2.5 demo files: wall time and peak RSS per run,
and the 2.5 / 2.3 ratio per pipeline.

Each run is its own process, measured from outside (`demo_run.measure`). The demo files of both families
are built once, untimed, before the first timed run; the two families of a pipeline run back to back so
that machine noise hits both alike. Inputs (an image, a clip with sound) are written once. Pipelines that
exist for one family only (DFR: the keyframe embedding; lipdub / hdr_ic_lora: LTX-2.3) get one row.

    uv run python benchmarks/demo_generations.py
    uv run python benchmarks/demo_generations.py --only distilled dfr --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from demo_run import Measurement, measure

FAMILIES = ("ltx-2.3", "ltx-2.5")
SMALL = ["--height", "64", "--width", "64", "--num-frames", "9"]


def _inputs(folder: Path) -> tuple[Path, Path]:
    from PIL import Image

    from ltx_pipelines.io.video_writer import encode_video

    image = folder / "red.png"
    Image.new("RGB", (64, 64), (200, 30, 60)).save(image)
    clip = folder / "clip.mp4"
    frames = torch.rand(17, 64, 64, 3, generator=torch.Generator().manual_seed(0))
    t = torch.arange(48_000) / 48_000
    tone = torch.stack([torch.sin(2 * torch.pi * 220 * t), torch.sin(2 * torch.pi * 330 * t)]) * 0.3
    encode_video(clip, frames, fps=24, audio=tone, audio_sample_rate=48_000, container_suffix=".mp4")
    return image, clip


def _cases(image: Path, clip: Path) -> dict[str, tuple[list[str], str, tuple[str, ...]]]:
    """Pipeline module -> (its extra flags, output suffix, the demo families it runs)."""
    one = ["--num-inference-steps", "1"]
    both, only_25, only_23 = FAMILIES, ("ltx-2.5",), ("ltx-2.3",)
    return {
        "distilled": ([*SMALL], ".mp4", both),
        "ti2vid_one_stage": ([*SMALL, *one], ".mp4", both),
        "ti2vid_two_stages": ([*SMALL, *one], ".mp4", both),
        "ti2vid_two_stages_hq": ([*SMALL, "--num-inference-steps", "2"], ".mp4", both),
        "keyframe_interpolation": (
            [*SMALL, *one, "--image", str(image), "0", "1.0", "--image", str(image), "8", "1.0"],
            ".mp4",
            both,
        ),
        "t2a_one_stage": (["--num-frames", "9", *one], ".wav", both),
        "a2vid_two_stage": ([*SMALL, *one, "--audio-path", str(clip)], ".mp4", both),
        "retake": (["--video-path", str(clip), "--start-time", "0.1", "--end-time", "0.3"], ".mp4", both),
        "ic_lora": ([*SMALL, "--video-conditioning", str(clip), "1.0"], ".mp4", both),
        "dubit": (["--reference-video", str(clip)], ".mp4", both),
        "dfr": (["--num-frames", "9", "--frame-rate", "12", "--temporal-upsample-rounds", "1"], ".mp4", only_25),
        "lipdub": (["--reference-video", str(clip)], ".mp4", only_23),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, help="Pipelines to run (default: all).")
    parser.add_argument("--repeats", type=int, default=1, help="Timed runs per pipeline and family (median kept).")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the runs (default: unset).")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ltx-demo-generations-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"))
    if args.threads is not None:
        env["OMP_NUM_THREADS"] = str(args.threads)
    log = work / "runs.log"
    image, clip = _inputs(work)
    cases = _cases(image, clip)
    names = args.only or list(cases)
    unknown = sorted(set(names) - set(cases))
    if unknown:
        parser.error(f"--only {' '.join(unknown)}: not one of {', '.join(cases)}")

    def command(module: str, family: str, extra: list[str], output: Path) -> list[str]:
        return [
            sys.executable, "-m", f"ltx_pipelines.{module}", "--demo", "--demo-family", family,
            "--prompt", "A red fox trots across a snowy field.", "--seed", "3", "--device", "cpu",
            "--output-path", str(output), "--overwrite", "--log-level", "WARNING", *extra,
        ]  # fmt: skip

    for family in FAMILIES:  # builds each family's demo files, untimed
        warm = measure(f"build {family}", command("t2a_one_stage", family, ["--num-frames", "9",
                       "--num-inference-steps", "1"], work / f"warm-{family}.wav"), env, log)  # fmt: skip
        if warm.returncode != 0:
            print(f"building the {family} demo files failed; see {log}", file=sys.stderr)
            return 1

    print(f"{'pipeline':<24}{'2.3 s':>8}{'2.5 s':>8}{'2.5/2.3':>9}{'2.3 MiB':>9}{'2.5 MiB':>9}")
    failed = False
    for name in names:
        extra, suffix, families = cases[name]
        runs: dict[str, list[Measurement]] = {family: [] for family in families}
        for repeat in range(args.repeats):
            for family in families:
                output = work / f"{name}-{family}-{repeat}{suffix}"
                runs[family].append(measure(f"{name} {family}", command(name, family, extra, output), env, log))
        walls: dict[str, float] = {}
        cells = {family: ("-", "-") for family in FAMILIES}
        for family, measured in runs.items():
            if any(m.returncode != 0 for m in measured):
                failed = True
                cells[family] = ("failed", "-")
                continue
            walls[family] = statistics.median(m.wall_s for m in measured)
            cells[family] = (f"{walls[family]:.1f}", f"{max(m.peak_rss_mib for m in measured):.0f}")
        ratio = f"{walls['ltx-2.5'] / walls['ltx-2.3']:.2f}" if len(walls) == 2 else "-"
        (t23, m23), (t25, m25) = cells["ltx-2.3"], cells["ltx-2.5"]
        print(f"{name:<24}{t23:>8}{t25:>8}{ratio:>9}{m23:>9}{m25:>9}", flush=True)
    print(f"log: {log}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
