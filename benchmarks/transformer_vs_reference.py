"""Our transformer forward against the reference's (Lightricks/LTX-2 v1.2.0), side by side on the CPU.

Both are the LTX-2.3 22B transformer at its full widths (the `transformer` config of
`ltx-2.3-22b-keys.json`) with `--blocks` blocks, loaded from the SAME released-layout safetensors file of
random bf16 weights (the released files' dtype; written once here by our package: `model.diffusion_model.*`
keys and the config in the metadata) through each side's own loader (ours: `ltx_core.loader.build_model`;
the reference's: its `SingleGPUModelBuilder` with `LTXModelConfigurator`) in the dtype under test. The same
inputs (1024 video tokens = 4 x 16 x 16 latent, 128 audio tokens, 128 text tokens per stream, one sigma)
are read from one file by both. Each run is a fresh process with `--threads` threads, ours and the
reference's alternating (who goes first rotates every round); a child makes one untimed call (oneDNN
primitives, first-touch allocations), then times `--calls` calls (median). Printed per dtype: the median
over rounds of wall seconds, CPU seconds and peak RSS (the process's, loading included), their ratios
(ours / reference), the forward's own peak (`forward_rss_mib`: the high-water mark reset after loading,
read from /proc/self/status) and the largest difference between the two outputs.

The reference is not part of this repository: install it into a scratch virtual environment that uses
this environment's torch, so that only the model code differs:

    git --git-dir=<LTX-2 mirror> archive v1.2.0 | tar -x -C /tmp/ref_b
    uv venv /tmp/refvenv_b --python .venv/bin/python
    uv pip install --python /tmp/refvenv_b/bin/python --no-deps /tmp/ref_b/packages/ltx-core \
        /tmp/ref_b/packages/ltx-trainer
    echo $PWD/.venv/lib/python3.11/site-packages > /tmp/refvenv_b/lib/python3.11/site-packages/zz_ours.pth

    uv run python benchmarks/transformer_vs_reference.py --ref-python /tmp/refvenv_b/bin/python
    uv run python benchmarks/transformer_vs_reference.py --dtypes bf16 --rounds 5

Measured 2026-12-02, AMD EPYC (avx2 avx512f avx512_bf16 avx512_vnni; no AMX), torch 2.15.0, 2 threads,
2 blocks, 3 rounds, 2 timed calls per child, on a machine shared with other work (load average 6-15 on
its 2 cores: 0.15-0.56 CPU seconds per wall second where 2 would be both threads busy, so wall time
mostly measures the scheduler; CPU seconds are the figure to trust):

    dtype  ours / reference: wall s          CPU s                  peak RSS MiB (= the forward's peak)
    fp32   76.5 / 77.8 = 0.98                21.8 / 28.3 = 0.77     5546 / 5718 = 0.97
    bf16   72.7 / 52.3 = 1.39                12.3 / 14.9 = 0.83     3131 / 3209 = 0.98

Per round, CPU: fp32 0.77 0.76 0.76, bf16 0.86 0.79 0.81; wall: fp32 0.91 0.98 0.78, bf16 1.62 1.10 1.03.
Outputs: fp32 max |ours - ref| 2.9e-6 (video), 2.1e-6 (audio) of mean |ref| 0.90; bf16 0.031 (one bf16
step at the values' scale). A 1-block run at load 5-7 gave CPU 0.55 (fp32) and 0.53 (bf16). Where ours
does less: the AdaLN embeddings once per distinct timestep instead of once per token. What both spend
the same on: the Linear layers (~77% of our fp32 forward, torch profiler) and rms_norm, which torch runs
on the CPU as separate float32 passes (upcast, pow, mean, rsqrt, mul, downcast: ~16% of our bf16 forward).

Re-measured 2026-12-02 (same machine, load 6-8), bf16, 3 rounds, after the RMS norm became a tuned kernel
choice (`ltx_core.tune.norm`): our default paths CPU 11.86 / 14.59 = 0.81 (rounds 0.81 0.81 0.76); with
`LTX_KERNEL_PATH=rms-norm=mirrored` (what `python -m ltx_core.tune` picks here for the 4096-wide video
stream: 5.2 vs 6.3 ms; float32 keeps composite, 20 vs 60 ms) 10.88 / 14.13 = 0.77 (0.81 0.77 0.80); peak RSS
0.95 / 0.94; outputs as above (max 0.031).

Kernel paths: children run with `LTX_KERNEL_TUNING=0` (our default paths, no timing inside a run)
unless the environment sets it (`LTX_KERNEL_PATH` forces a path in our children only).

The child side of the reference imports only the reference's public classes and this file's own code,
so the same file runs under both interpreters.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from side_by_side import (
    MEASURES,
    Rounds,
    check_ref_python,
    dump,
    load_average,
    python_for,
    random_weights,
    reset_peak_rss,
    run_child,
)

_REPO = Path(__file__).resolve().parents[1]
_KEYS = _REPO / "tests" / "golden" / "ltx-2.3-22b-keys.json"
_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
_PREFIX = "model.diffusion_model."
FRAMES, HEIGHT, WIDTH = 4, 16, 16  # 1024 video tokens
AUDIO_TOKENS = 128
TEXT_TOKENS = 128


def _config(blocks: int) -> dict:
    return {"transformer": {**json.loads(_KEYS.read_text())["config"]["transformer"], "num_layers": blocks}}


def write_inputs(folder: Path, blocks: int) -> dict:
    """The weights file and the inputs file; returns this CPU's capability line."""
    import torch
    from safetensors.torch import save_file

    from ltx_core.model.transformer import configure_transformer
    from ltx_core.tune import this_machine

    config = _config(blocks)
    with torch.device("meta"):
        model = configure_transformer(config)
    g = torch.Generator().manual_seed(0)
    weights = {k: v.bfloat16() for k, v in random_weights(model, _PREFIX, g).items()}
    save_file(weights, str(folder / "weights.safetensors"), metadata={"config": json.dumps(config)})
    del weights
    c = model.config
    grid = torch.stack(torch.meshgrid(*(torch.arange(n) for n in (FRAMES, HEIGHT, WIDTH)), indexing="ij"), 0)
    starts = grid.reshape(3, -1).double() * torch.tensor([8 / 24, 32, 32], dtype=torch.float64)[:, None]
    step = torch.tensor([8 / 24, 32, 32], dtype=torch.float64)[:, None]
    t = torch.arange(AUDIO_TOKENS, dtype=torch.float64) * 0.04
    video_tokens = FRAMES * HEIGHT * WIDTH
    inputs = {
        "video_latent": torch.randn(1, video_tokens, c.video.in_channels, generator=g),
        "video_positions": torch.stack([starts, starts + step], dim=-1)[None].float(),
        "video_context": torch.randn(1, TEXT_TOKENS, c.video.context_dim, generator=g),
        "audio_latent": torch.randn(1, AUDIO_TOKENS, c.audio.in_channels, generator=g),
        "audio_positions": torch.stack([t, t + 0.04], dim=-1)[None, None].float(),
        "audio_context": torch.randn(1, TEXT_TOKENS, c.audio.context_dim, generator=g),
        "sigma": torch.tensor([0.8]),
    }
    save_file(inputs, str(folder / "inputs.safetensors"))
    return {"capability": this_machine().capability()}


def _model(impl: str, path: Path, dtype):
    if impl == "ref":
        from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
        from ltx_core.model.transformer import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModelConfigurator

        builder = SingleGPUModelBuilder(
            model_path=str(path),
            model_class_configurator=LTXModelConfigurator,
            model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP,
        )
        return builder.build(device="cpu", dtype=dtype).eval()
    from ltx_core.loader import build_model
    from ltx_core.model.transformer import AV_TRANSFORMER

    return build_model(AV_TRANSFORMER, path, dtype=dtype, device="cpu")


def _modalities(impl: str, tensors: dict, dtype):
    """The two streams' inputs; the reference takes per-token timesteps as (B, T), ours as (B, T, 1)."""
    import torch

    from ltx_core.model.transformer import Modality

    def modality(stream: str) -> Modality:
        latent = tensors[f"{stream}_latent"].to(dtype)
        timesteps = torch.full(latent.shape[:2], float(tensors["sigma"][0]))
        return Modality(
            latent=latent,
            sigma=tensors["sigma"],
            timesteps=timesteps if impl == "ref" else timesteps[..., None],
            positions=tensors[f"{stream}_positions"],
            context=tensors[f"{stream}_context"].to(dtype),
        )

    return modality("video"), modality("audio")


def child(impl: str, dtype_name: str, folder: Path, threads: int, calls: int) -> dict:
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(threads)
    dtype = getattr(torch, _DTYPES[dtype_name])
    model = _model(impl, folder / "weights.safetensors", dtype).requires_grad_(False)
    video, audio = _modalities(impl, load_file(str(folder / "inputs.safetensors")), dtype)
    forward_peak = reset_peak_rss()
    extra = (None,) if impl == "ref" else ()  # the reference's forward takes its perturbations positionally
    walls, cpus = [], []
    with torch.inference_mode():
        for _ in range(calls + 1):
            began, cpu_began = time.perf_counter(), time.process_time()
            v, a = model(video, audio, *extra)
            walls.append(time.perf_counter() - began)
            cpus.append(time.process_time() - cpu_began)
    from safetensors.torch import save_file

    outputs = {"video": v.float().contiguous(), "audio": a.float().contiguous()}
    save_file(outputs, str(folder / f"out_{impl}.safetensors"))
    return {
        "wall_s": statistics.median(walls[1:]),
        "cpu_s": statistics.median(cpus[1:]),
        "first_call_s": walls[0],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "forward_rss_mib": forward_peak(),
    }


def compare(folder: Path) -> dict:
    from safetensors.torch import load_file

    ours, ref = load_file(str(folder / "out_ours.safetensors")), load_file(str(folder / "out_ref.safetensors"))
    out = {}
    for stream in ("video", "audio"):
        diff = (ours[stream] - ref[stream]).abs()
        out[stream] = {"max_abs": float(diff.max()), "ref_abs_mean": float(ref[stream].abs().mean())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref-python", default="/tmp/refvenv_b/bin/python")
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=sorted(_DTYPES))
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2, help="timed calls per child, after one untimed call")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "write":
            dump(write_inputs(Path(rest[0]), args.blocks))
        elif kind == "compare":
            dump(compare(Path(rest[0])))
        else:
            dump(child(kind, rest[0], Path(rest[1]), args.threads, args.calls))
        return
    check_ref_python(args.ref_python, "this module's docstring")
    script = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory(prefix="transformer_vs_ref_") as tmp:
        info = run_child(sys.executable, [script, "--child", "write", tmp, "--blocks", str(args.blocks)], args.threads)
        print(info["capability"])
        print(
            f"22B transformer widths, {args.blocks} blocks, {FRAMES * HEIGHT * WIDTH} video + {AUDIO_TOKENS} audio "
            f"tokens, {TEXT_TOKENS} text tokens; {args.threads} threads; load before {load_average()}",
            flush=True,
        )
        rounds = Rounds()
        for dtype in args.dtypes:

            def run(impl: str, dtype: str = dtype) -> dict:
                cmd = [script, "--child", impl, dtype, tmp, "--threads", str(args.threads), "--calls", str(args.calls)]
                return run_child(python_for(impl, args.ref_python), cmd, args.threads)

            rounds.alternate(dtype, ["ours", "ref"], args.rounds, run)
            diff = run_child(sys.executable, [script, "--child", "compare", tmp], args.threads)
            print(f"  {dtype} outputs, ours vs reference (last round): {json.dumps(diff)}", flush=True)
        print(f"load after {load_average()}")
        print(rounds.table(measures=[*MEASURES, ("forward_rss_mib", "forward RSS MiB")]))


if __name__ == "__main__":
    main()
