"""Step caching (First-Block-Cache) on the golden guided runs: transformer calls saved vs deviation.

Every run of `fx_pipeline_guided` (one-stage, two-stage with the distilled LoRA, HQ res2s) is replayed
as `test_guided_golden.py` does (stored contexts, recorded draws), once uncached and once per threshold,
with the guided stages' transformer wrapped in `StepCachedTransformer` (only the guided stages:
`stage_guided_denoiser`; the distilled refinement stage is never cached). Printed per run and
threshold: calls through the cache, calls that reused the deep residual, and the largest deviation
of every final latent and of the decoded frames from the uncached run, relative to the uncached
run's largest magnitude.

The golden transformer is tiny (few blocks), so wall time says nothing here; calls saved is the
figure that carries over (a reused call runs the first block and the output layers only).

    uv run python benchmarks/step_cache_guided.py
    uv run python benchmarks/step_cache_guided.py --thresholds 0.1 0.2 0.4
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from unittest import mock

import torch

_REPO = Path(__file__).resolve().parents[1]


def _test_helpers():
    """The golden guided test's replay helpers (builds each run's pipeline from the fixture's params)."""
    path = _REPO / "packages" / "ltx-pipelines" / "tests" / "pipelines" / "test_guided_golden.py"
    spec = importlib.util.spec_from_file_location("guided_golden_helpers", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.05, 0.15, 0.3])
    args = parser.parse_args()
    sys.path.insert(0, str(_REPO))
    from conftest import find_golden_dir, load_golden_fixture
    from ltx_core.components.step_cache import StepCachedTransformer
    from ltx_core.model.transformer import X0Model
    from ltx_pipelines.engine import guided
    from ltx_pipelines.engine.denoising_stage import ReplayedNoise
    from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest

    helpers = _test_helpers()
    golden = find_golden_dir()
    manifest = json.loads((golden / "manifest.json").read_text())
    upsampler = next(
        golden / e["file"] for e in manifest["spatial_upsamplers"].values()
        if float(e["config"].get("spatial_scale", 2.0)) == 2.0 and not e["config"].get("temporal_upsample", False)
    )  # fmt: skip
    files = helpers.ModelFiles(golden / manifest["checkpoint"]["file"], upsampler, golden)
    fx = load_golden_fixture(golden / "fx_pipeline_guided.safetensors")
    p = fx.params
    torch.set_num_threads(2)

    def replay(run: str, threshold: float | None):
        wrappers: list[StepCachedTransformer] = []

        def x0_model(transformer):
            if threshold is None:
                return X0Model(transformer)
            wrapper = StepCachedTransformer(transformer, threshold)
            wrappers.append(wrapper)
            return X0Model(wrapper)

        pipeline = helpers._build(p, run, files, helpers._stage_loras(p, run))
        noise = ReplayedNoise(fx.tensors, prefix=f"{run}.noise.")
        with mock.patch.object(guided, "X0Model", x0_model):
            generation = pipeline.generate_from_contexts(
                helpers._contexts(fx, ""), helpers._contexts(fx, "negative_"),
                video=VideoRequest(height=p["height"], width=p["width"], num_frames=p["frames"], frame_rate=p["fps"]),
                noise=noise,
                guidance=GuidanceRequest(
                    num_inference_steps=p[f"{run}.num_inference_steps"],
                    video=helpers._guidance(p[f"{run}.video_guider"]),
                    audio=helpers._guidance(p[f"{run}.audio_guider"]),
                ),
                sde_noise=noise,
            )  # fmt: skip
        outputs = {k: v.float().clone() for k, v in generation.latents.items()}
        outputs["video_frames"] = torch.cat([f.float() for f in generation.frames])
        calls = sum(w.stats.calls for w in wrappers)
        reused = sum(w.stats.reused for w in wrappers)
        changes = sorted(c for w in wrappers for c in w.stats.changes)
        return outputs, calls, reused, changes

    print(f"golden set {golden}; thresholds {args.thresholds}")
    print(f"{'run':<22}{'threshold':>10}{'calls':>7}{'reused':>8}  deviation / max |uncached| per output")
    for run in helpers._runs(fx):
        base, *_ = replay(run, None)
        for threshold in args.thresholds:
            got, calls, reused, changes = replay(run, threshold)
            deviation = {k: float((got[k] - v).abs().max() / v.abs().max().clamp(min=1e-12)) for k, v in base.items()}
            text = ", ".join(f"{k} {d:.2e}" for k, d in deviation.items())
            print(f"{run:<22}{threshold:>10.3f}{calls:>7}{reused:>8}  {text}", flush=True)
            if changes:  # the first-block change each call measured (what the threshold is compared with)
                quartiles = [changes[int(q * (len(changes) - 1))] for q in (0.0, 0.25, 0.5, 0.75, 1.0)]
                print(f"{'':<22}first-block change min/q1/median/q3/max: {' '.join(f'{c:.3f}' for c in quartiles)}")


if __name__ == "__main__":
    main()
