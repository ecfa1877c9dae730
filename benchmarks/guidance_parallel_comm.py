"""Communication per guided step: guidance parallel vs sequence parallel, counted from the 22B shapes (CPU only).

No tensor is moved: the LTX-2.3 22B transformer is built on the meta device from the released config
(`tests/golden/ltx-2.3-22b-keys.json`) and the bytes follow from its layer widths and the token counts.

Sequence parallel (Ulysses) over S ranks, per model call of batch B: in every block each sharded attention
(video self, audio self, audio->video, video->audio) swaps q, k, v and its output by all-to-all; a rank
receives (S - 1) / S of its shard of each, i.e. (S - 1) / S^2 of the whole tensor. The outputs are then
all-gathered: each rank receives the (S - 1) / S it did not compute. Tokens are padded to a multiple of S.

Guidance parallel over N ranks in G pass groups of S = N / G: each pass's x0 (B x T x C per modality) is
broadcast from its group's first rank, so a rank receives the x0 of every pass its group did not run; with
S > 1 each pass also pays sequence parallel over its S ranks.

Printed per world size: bytes a rank receives per step (all passes), both ways, and the ratio.

    python benchmarks/guidance_parallel_comm.py                       # 768 x 512 x 121, 4 passes, bf16
    python benchmarks/guidance_parallel_comm.py --passes 2 --worlds 2 4 8
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ltx_core.model.transformer import configure_transformer
from ltx_core.multigpu import pass_group_count

KEYS = Path(__file__).resolve().parents[1] / "tests" / "golden" / "ltx-2.3-22b-keys.json"
SHARDED = (("attn1", "video", "video"), ("audio_attn1", "audio", "audio"),
           ("audio_to_video_attn", "video", "audio"), ("video_to_audio_attn", "audio", "video"))  # fmt: skip
"""(layer, the stream of its queries, the stream of its keys and values) for every all-to-all attention."""


@dataclass(frozen=True)
class Widths:
    """What the traffic depends on: per block, each sharded attention's (query stream, key stream, q width,
    k width, v width); the x0 channels per stream; the block count."""

    attentions: tuple[tuple[str, str, int, int, int], ...]
    channels: dict[str, int]
    blocks: int


def widths_22b() -> Widths:
    path = Path(os.environ["LTX_GOLDEN_DIR"]) / KEYS.name if "LTX_GOLDEN_DIR" in os.environ else KEYS
    config = json.loads(path.read_text())["config"]
    with torch.device("meta"):
        model = configure_transformer(config)
    block = model.transformer_blocks[0]
    attentions = tuple(
        (q, kv, layer.to_q.out_features, layer.to_k.out_features, layer.to_v.out_features)
        for name, q, kv in SHARDED
        if (layer := getattr(block, name, None)) is not None
    )
    c = config["transformer"]
    return Widths(attentions, {"video": c["out_channels"], "audio": c["audio_out_channels"]}, model.num_blocks)


def _padded(tokens: int, world: int) -> int:
    return -(-tokens // world) * world


def sequence_parallel_elements(w: Widths, tokens: dict[str, int], world: int, batch: int) -> float:
    """Elements one rank receives in one model call of `batch` items over `world` ranks."""
    if world == 1:
        return 0.0
    t = {name: _padded(n, world) for name, n in tokens.items()}
    share = (world - 1) / world**2  # of a whole tensor, per all-to-all
    per_block = sum((t[q] * (qw + qw) + t[kv] * (kw + vw)) * share for q, kv, qw, kw, vw in w.attentions)
    gather = sum(t[name] * w.channels[name] * (world - 1) / world for name in tokens)
    return batch * (w.blocks * per_block + gather)


def guidance_parallel_elements(w: Widths, tokens: dict[str, int], world: int, passes: int, batch: int) -> float:
    """Elements one rank receives in one step of `passes` passes (the rank of group 0, which runs the most)."""
    groups = pass_group_count(world, passes)
    size = world // groups
    own = len(range(0, passes, groups))  # group 0 runs passes 0, G, 2G, ...
    x0 = sum(tokens[name] * w.channels[name] for name in tokens) * batch
    return (passes - own) * x0 + own * sequence_parallel_elements(w, tokens, size, batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--passes", type=int, default=4, help="guidance passes per step (cond, CFG, STG, modality)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--bytes-per-element", type=int, default=2, help="2: bf16 activations and latents")
    args = parser.parse_args()
    w = widths_22b()
    tokens = {
        "video": ((args.frames - 1) // 8 + 1) * (args.height // 32) * (args.width // 32),
        "audio": round(args.frames / 24 * 25),
    }
    print(f"22B: {w.blocks} blocks, sharded attentions {w.attentions}; {tokens} tokens; {args.passes} passes/step")
    for world in args.worlds:
        # Sequence parallel alone: every pass through the Ulysses all-to-alls of all ranks (batched or not, the
        # same bytes).
        sp = sequence_parallel_elements(w, tokens, world, args.passes) * args.bytes_per_element
        gp = guidance_parallel_elements(w, tokens, world, args.passes, 1) * args.bytes_per_element
        groups = pass_group_count(world, args.passes)
        row = {
            "world": world, "pass_groups": f"{groups} x {world // groups}",
            "sequence_parallel_MiB_per_rank_step": round(sp / 2**20, 1),
            "guidance_parallel_MiB_per_rank_step": round(gp / 2**20, 2),
            "ratio": round(sp / gp, 1) if gp else None,
        }  # fmt: skip
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
