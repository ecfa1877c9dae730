"""Peak host memory of a narrow 48-block transformer: disk streaming vs RAM streaming vs full load (CPU).

A random 48-block model (video 8 heads x 64, audio 4 heads x 64, LTX-2.3 layout) is written once as
a released-layout bf16 checkpoint; each mode then builds it through `ltx_core.runtime.build_transformer`
and runs one forward in its own process, so ru_maxrss belongs to that run alone. The "goal" line is
the issue's bound for disk streaming: the process's baseline (interpreter, torch, inputs) + the
model's structure (Python objects and build overhead, measured as what the full build holds beyond
its weights) + non-block weights + 3 blocks + the forward's activations (measured as the extra peak
of the full model's forward over its post-build RSS). On the CPU the "device" slot is host memory
too, so the run uses 1 device slot + 2 host slots: 3 blocks held at once.

    uv run python benchmarks/block_streaming_memory.py
    uv run python benchmarks/block_streaming_memory.py --blocks 48 --tokens 2048
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The parent process stays small (no torch): Linux keeps ru_maxrss across fork + exec, so a child
# forked from a large parent would report the parent's peak as its own.
CONFIG = {
    "num_attention_heads": 8,
    "attention_head_dim": 64,
    "cross_attention_dim": 512,
    "audio_num_attention_heads": 4,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 256,
    "caption_channels": None,
    "apply_gated_attention": True,
    "cross_attention_adaln": True,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "frequencies_precision": "float64",
    "rope_type": "split",
}
MODES = {"full": "none", "ram": "cpu", "disk": "disk"}


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _config(blocks: int) -> dict:
    section = copy.deepcopy(CONFIG)
    section["num_layers"] = blocks
    section.pop("caption_channels")
    return {"transformer": section}


def write_checkpoint(path: Path, blocks: int) -> None:
    import torch
    from safetensors.torch import save_file

    from ltx_core.model.transformer import configure_transformer

    config = _config(blocks)
    with torch.device("meta"):
        model = configure_transformer(config)
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for name, p in model.state_dict().items():
        fan_in = p.shape[-1] if p.ndim > 1 else 4
        tensors[f"model.diffusion_model.{name}"] = (torch.randn(p.shape, generator=g) / fan_in**0.5).to(torch.bfloat16)
    save_file(tensors, str(path), metadata={"config": json.dumps(config)})


def _inputs(tokens: int):
    import torch

    from ltx_core.model.transformer import Modality

    g = torch.Generator().manual_seed(1)
    audio_tokens = max(tokens // 16, 8)

    def modality(t: int, channels: int, axes: int, width: int) -> Modality:
        start = torch.arange(t, dtype=torch.float32)
        pos = torch.stack([start, start + 1], -1)[None, None].expand(1, axes, t, 2).clone()
        return Modality(
            latent=torch.randn(1, t, channels, generator=g).bfloat16(),
            timesteps=torch.full((1, t, 1), 0.7).bfloat16(),
            sigma=torch.tensor([0.7]),
            positions=pos,
            context=torch.randn(1, 64, width, generator=g).bfloat16(),
        )

    return modality(tokens, 128, 3, 512), modality(audio_tokens, 128, 1, 256)


def run_one(path: Path, mode: str, tokens: int) -> dict:
    import torch

    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_core.runtime import RuntimeOptions, build_transformer

    video, audio = _inputs(tokens)
    baseline = _peak_rss_mib()
    # On the CPU the "device" slot is host memory too: 1 device slot + 2 host slots = 3 blocks held.
    options = RuntimeOptions(offload=MODES[mode], device_slots=1, host_slots=2)
    start = time.perf_counter()
    model = build_transformer(AV_TRANSFORMER, path, options, device="cpu", dtype=torch.bfloat16)
    built = _peak_rss_mib()
    with torch.inference_mode():
        model(video, audio)
    seconds = time.perf_counter() - start
    tensors = [(n, t) for n, t in (*model.named_parameters(), *model.named_buffers()) if not t.is_meta]
    non_block = sum(t.numel() * t.element_size() for n, t in tensors if not n.startswith("transformer_blocks."))
    resident = sum(t.numel() * t.element_size() for _, t in tensors)
    streamer = getattr(model, "block_streamer", None)
    block = streamer.slots.layout.nbytes if streamer is not None else None
    return {
        "mode": mode,
        "baseline_mib": baseline,
        "after_build_mib": built,
        "peak_mib": _peak_rss_mib(),
        "seconds": seconds,
        "non_block_mib": non_block / 2**20,
        "resident_weights_mib": resident / 2**20,
        "block_mib": None if block is None else block / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=1024, help="video tokens (audio gets 1/16)")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--write", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write_checkpoint(Path(args.write), args.blocks)
        return
    if args.child:
        print(json.dumps(run_one(Path(args.child[0]), args.child[1], args.tokens)), flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "narrow.safetensors"
        subprocess.run([sys.executable, __file__, "--write", str(path), "--blocks", str(args.blocks)], check=True)
        size = path.stat().st_size / 2**20
        print(f"narrow {args.blocks}-block transformer, bf16 checkpoint {size:.0f} MiB, {args.tokens} video tokens")
        results = {}
        for mode in MODES:
            cmd = [sys.executable, __file__, "--child", str(path), mode, "--tokens", str(args.tokens)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            results[mode] = r = json.loads(out)
            print(
                f"{mode:>5}: peak RSS {r['peak_mib']:7.0f} MiB (baseline {r['baseline_mib']:.0f}, after build "
                f"{r['after_build_mib']:.0f})  {r['seconds']:.1f} s",
                flush=True,
            )
    full, disk = results["full"], results["disk"]
    activations = full["peak_mib"] - full["after_build_mib"]
    # Python objects of the model structure, the reader, allocator slack: what the full build holds beyond its weights
    structure = full["after_build_mib"] - full["baseline_mib"] - full["resident_weights_mib"]
    goal = disk["baseline_mib"] + structure + disk["non_block_mib"] + 3 * disk["block_mib"] + activations
    print(
        f"disk / full peak RSS: {disk['peak_mib'] / full['peak_mib']:.2f}; above baseline: "
        f"{(disk['peak_mib'] - disk['baseline_mib']) / (full['peak_mib'] - full['baseline_mib']):.3f}"
    )
    print(
        f"goal (baseline + structure {structure:.0f} + non-block {disk['non_block_mib']:.0f} + 3 blocks x "
        f"{disk['block_mib']:.1f} + activations "
        f"{activations:.0f} MiB) = {goal:.0f} MiB; disk streaming peak {disk['peak_mib']:.0f} MiB "
        f"({disk['peak_mib'] - goal:+.1f} MiB against the goal)"
    )


if __name__ == "__main__":
    main()
