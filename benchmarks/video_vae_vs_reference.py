"""Our video VAE decoder against the reference's, side by side on the CPU: time and peak RSS ratios.

Both decoders are the LTX-2.3 22B decoder architecture (the `vae` config of `ltx-2.3-22b-keys.json`),
loaded from the SAME safetensors file of random float32 weights (written once, here, by our package;
the two share the checkpoint's key names) and cast to the dtype under test. Every decode runs in a
fresh process with 2 threads, ours and the reference's alternating (the order flips every round), so
both see the same machine load. Each child decodes the same latent once (cold: as a user waits for
it) with the default tiling or untiled, and reports wall seconds, CPU seconds (user + system: less
swayed than wall time by other processes on a shared machine), peak RSS and its output, which the
parent compares between the decoders. `--before-src` adds a third decoder, ours from another source
tree (e.g. `git archive <commit> packages/ltx-core/src | tar -x -C /tmp/before`), run with this
interpreter and that tree first on PYTHONPATH.

The reference is not part of this repository: install its ltx-core into a scratch virtual
environment outside it, using this environment's torch so that only the model code differs:

    git -C <LTX-2 mirror> archive HEAD | tar -x -C /tmp/ref_vae
    uv venv /tmp/refvenv_vae --python .venv/bin/python
    uv pip install --python /tmp/refvenv_vae/bin/python --no-deps /tmp/ref_vae/packages/ltx-core
    echo $PWD/.venv/lib/python3.11/site-packages > /tmp/refvenv_vae/lib/python3.11/site-packages/zz_ours.pth

    uv run python benchmarks/video_vae_vs_reference.py --ref-python /tmp/refvenv_vae/bin/python
    uv run python benchmarks/video_vae_vs_reference.py --ref-python ... --dtypes fp32 --modes untiled --rounds 3
    uv run python benchmarks/video_vae_vs_reference.py --before-src /tmp/before/packages/ltx-core/src

On a CPU without native bf16 convolution (no AVX512-BF16/AMX) the reference's bf16 decode runs
PyTorch's reference conv loops (`slow_conv3d`), ~25x slower than float32: use a smaller `--latent`
for bf16 there (`--latent 2 4 6`), or it runs for the better part of an hour.

The child side imports nothing from this repository but `ltx_core` (whichever one its interpreter
finds), so the same file runs under both interpreters.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
_DTYPES = {"bf16": "bfloat16", "fp32": "float32"}


def _keys_json() -> Path:
    golden = os.environ.get("LTX_GOLDEN_DIR")
    return (Path(golden) if golden else _REPO / "tests" / "golden") / "ltx-2.3-22b-keys.json"


def _vae_config() -> dict:
    return json.loads(_keys_json().read_text())["config"]["vae"]


def write_inputs(folder: Path, latent_fhw: tuple[int, int, int]) -> None:
    """Random float32 weights (our decoder's initialisation) and one latent, both as safetensors."""
    import torch
    from safetensors.torch import save_file

    sys.path.insert(0, str(_REPO / "benchmarks"))
    from video_vae_decode import _random_decoder

    decoder = _random_decoder({"vae": _vae_config()}, torch.float32)
    save_file({k: v.contiguous() for k, v in decoder.state_dict().items()}, str(folder / "weights.safetensors"))
    latent = torch.randn(1, 128, *latent_fhw, generator=torch.Generator().manual_seed(1))
    save_file({"latent": latent}, str(folder / "latent.safetensors"))


def _build(impl: str, config: dict):
    import torch

    with torch.device("meta"):
        if impl == "ref":
            from ltx_core.model.video_vae.model_configurator import VideoDecoderConfigurator

            return VideoDecoderConfigurator.from_metadata({"config": {"vae": config}})
        from ltx_core.model.video_vae import video_decoder_from_config

        return video_decoder_from_config({"vae": config})


def _tiling(impl: str, mode: str):
    if mode == "untiled":
        return None
    if impl == "ref":
        from ltx_core.tiling import TileSizeConfig

        return TileSizeConfig.default()
    from ltx_core.model.video_vae import TilingConfig

    return TilingConfig.default()


def child(impl: str, dtype_name: str, mode: str, folder: Path, threads: int) -> dict:
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(threads)
    dtype = getattr(torch, _DTYPES[dtype_name])
    state = {k: v.to(dtype) for k, v in load_file(str(folder / "weights.safetensors")).items()}
    decoder = _build(impl, _vae_config())
    decoder.load_state_dict(state, assign=True)
    del state
    decoder = decoder.eval().requires_grad_(False)
    latent = load_file(str(folder / "latent.safetensors"))["latent"].to(dtype)
    tiling = _tiling(impl, mode)
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    chunks = []
    with torch.inference_mode():
        start, cpu_start = time.perf_counter(), time.process_time()
        for frames in decoder.decode_video(latent, tiling):
            chunks.append(frames.float().clone())  # a caller would write the chunk out here
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    video = torch.cat(chunks)
    torch.save(video, folder / f"out_{impl}_{dtype_name}_{mode}.pt")
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_after_build_mib": rss_built,
        "shape": list(video.shape),
    }


def _run_child(
    python: str, impl: str, dtype: str, mode: str, folder: Path, threads: int, src: str | None = None
) -> dict:
    cmd = [python, __file__, "--child", impl, dtype, mode, str(folder), "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"{impl} {dtype} {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> str:
    """The 1/5/15-minute load averages (`uptime`), to judge how shared the machine was."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _ratio_line(label: str, runs: dict[str, list[dict]], a: str, b: str) -> str:
    def ratios(key: str) -> list[float]:
        return [x[key] / y[key] for x, y in zip(runs[a], runs[b])]

    wall, cpu, rss = ratios("seconds"), ratios("cpu_seconds"), ratios("peak_rss_mib")
    return (
        f"{label}: {a}/{b} wall {statistics.median(wall):.2f} {[round(r, 2) for r in wall]}, "
        f"CPU {statistics.median(cpu):.2f} {[round(r, 2) for r in cpu]}, peak RSS {statistics.median(rss):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref-python", default="/tmp/refvenv_vae/bin/python")
    parser.add_argument("--latent", type=int, nargs=3, default=[3, 8, 12], metavar=("F", "H", "W"))
    parser.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=sorted(_DTYPES))
    parser.add_argument("--modes", nargs="+", default=["default", "untiled"], choices=["default", "untiled"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--before-src", default=None, help="another ltx_core source tree to run as 'before'")
    parser.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        impl, dtype, mode, folder = args.child
        print(json.dumps(child(impl, dtype, mode, Path(folder), args.threads)), flush=True)
        return
    if not Path(args.ref_python).is_file():
        parser.error(f"--ref-python {args.ref_python} does not exist; see the module docstring for the set-up")

    import torch

    with tempfile.TemporaryDirectory(prefix="vae_vs_ref_") as tmp:
        folder = Path(tmp)
        write_inputs(folder, tuple(args.latent))
        from ltx_core.tune import this_machine

        print(this_machine().capability())  # the kernel paths, and so the ratios, depend on it
        print(f"22B video VAE decoder, latent (1, 128, {', '.join(map(str, args.latent))}), {args.threads} threads")
        for dtype in args.dtypes:
            for mode in args.modes:
                impls = ["ours", "ref"] + (["before"] if args.before_src else [])
                runs: dict[str, list[dict]] = {impl: [] for impl in impls}
                for r in range(args.rounds):
                    for impl in impls[r % len(impls) :] + impls[: r % len(impls)]:  # rotate who goes first
                        python = args.ref_python if impl == "ref" else sys.executable
                        src = args.before_src if impl == "before" else None
                        res = _run_child(python, impl, dtype, mode, folder, args.threads, src)
                        runs[impl].append(res)
                        print(
                            f"  {dtype} {mode:<8} round {r} {impl:<6}: wall {res['seconds']:7.2f} s, "
                            f"CPU {res['cpu_seconds']:7.2f} s, peak RSS {res['peak_rss_mib']:6.0f} MiB, "
                            f"load {_load()}",
                            flush=True,
                        )
                ref = torch.load(folder / f"out_ref_{dtype}_{mode}.pt")
                for impl in impls[:1] + impls[2:]:
                    out = torch.load(folder / f"out_{impl}_{dtype}_{mode}.pt")
                    if out.shape != ref.shape:
                        raise RuntimeError(f"output shapes differ: {impl} {tuple(out.shape)}, ref {tuple(ref.shape)}")
                    diff = (out - ref).abs()
                    print(
                        _ratio_line(f"{dtype} {mode}", runs, impl, "ref")
                        + f"; frames {tuple(out.shape)} in [0, 1], max |{impl} - ref| {float(diff.max()):.2e}"
                        f", mean {float(diff.mean()):.2e}",
                        flush=True,
                    )
                if args.before_src:
                    print(_ratio_line(f"{dtype} {mode}", runs, "ours", "before"), flush=True)


if __name__ == "__main__":
    main()
