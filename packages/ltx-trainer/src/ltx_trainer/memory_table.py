"""The memory plan's table: for each run (rank, frames, audio or not) and card size, the fastest setting that
fits, or "no".

Each cell is `memory_plan`'s first fitting rung (`setting_ladder`) over a bf16 LoRA run with AdamW: as
configured, then gradient checkpointing, activation offload, then the fewest swapped blocks (fp8-cast
before one more swapped block). Cards are counted in GiB with the plan's 5% reserve, a dataset of 50
samples (text contexts cached, connectors released before step 1), 1024 text tokens, batch 1.

    uv run python -m ltx_trainer.memory_table tests/golden/ltx-2.3-22b-keys.json
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_trainer.training.memory_estimate import _GIB, TrainingSettings, TrainingShape, _Planner

CARDS_GIB = (12, 16, 24, 32, 48, 80)
HEADROOM = 0.05


@dataclass(frozen=True)
class TableRow:
    """One run of the table: its name, settings and shape."""

    name: str
    settings: TrainingSettings
    shape: TrainingShape


def default_rows(ranks: Sequence[int] = (16, 32), frames: Sequence[int] = (49, 121)) -> list[TableRow]:
    """768 x 512 at each frame count, audio-video and video-only (LTX-2 VAE: 32x spatial, 8x temporal)."""
    rows = []
    for rank in ranks:
        for count in frames:
            video = ((count - 1) // 8 + 1) * (512 // 32) * (768 // 32)
            audio = round(count / 24 * 25)  # 25 audio latents per second at 24 fps
            for with_audio in (True, False):
                rows.append(
                    TableRow(
                        name=f"rank {rank}, 768x512x{count}, {'audio-video' if with_audio else 'video-only'}",
                        settings=TrainingSettings(lora_rank=rank, with_audio=with_audio),
                        shape=TrainingShape(video, audio if with_audio else 0, 1024, samples=50),
                    )
                )
    return rows


def short(settings: TrainingSettings, base: TrainingSettings) -> str:
    """A cell: what changed from the row's settings, in few words."""
    words = []
    if settings.gradient_checkpointing and not base.gradient_checkpointing:
        words.append("ckpt")
    if settings.offload_activations and not base.offload_activations:
        words.append("offload")
    if settings.quantization != base.quantization:
        words.append(str(settings.quantization).replace("fp8-cast", "fp8"))
    if settings.blocks_to_swap:
        words.append(f"swap {settings.blocks_to_swap}")
    return " + ".join(words) or "as is"


def fit_table(
    checkpoint_config: Mapping[str, Any], rows: Sequence[TableRow], cards_gib: Sequence[float] = CARDS_GIB
) -> list[tuple[TableRow, list[str]]]:
    """Per row, per card: the fastest fitting setting (with its peak in GiB) or "no"."""
    out = []
    for row in rows:
        planner = _Planner(checkpoint_config, row.shape, "cuda")
        cells = []
        for gib in cards_gib:
            found = planner.first_fitting(row.settings, int(gib * _GIB * (1 - HEADROOM)))
            cells.append("no" if found is None else f"{short(found[0], row.settings)} ({found[1].peak / _GIB:.1f})")
        out.append((row, cells))
    return out


def markdown(table: list[tuple[TableRow, list[str]]], cards_gib: Sequence[float] = CARDS_GIB) -> str:
    lines = [
        "| run | " + " | ".join(f"{g:g} GB" for g in cards_gib) + " |",
        "|---|" + "---|" * len(cards_gib),
    ]
    lines += [f"| {row.name} | " + " | ".join(cells) + " |" for row, cells in table]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from ltx_core.command_parser import CommandParser

    parser = CommandParser(prog="python -m ltx_trainer.memory_table", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="a .safetensors checkpoint or a JSON file with its 'config'")
    args = parser.parse_args(argv)
    if args.checkpoint.suffix == ".json":
        checkpoint_config = json.loads(args.checkpoint.read_text())["config"]
    else:
        from ltx_core.loader import read_checkpoint_config

        checkpoint_config = {"transformer": read_checkpoint_config(args.checkpoint, "transformer")}
    print(markdown(fit_table(checkpoint_config, default_rows())))


if __name__ == "__main__":
    main()
