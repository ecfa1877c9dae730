"""The README's memory table: what `--offload auto` picks for the released models on cards of each size.

    uv run python -m ltx_core.offload_table            # prints the Markdown table README.md carries

Sizes are the released ones: the LTX-2.3 22B transformer, connectors, VAEs and vocoder are built on the meta
device from the config of `ltx-2.3-22b-keys.json` (the released file's key list; a test checks the counts
against its shapes); Gemma 3 12B from its released config (text sizes as the key list gives them). LTX-2.5
takes the same 22B sizes with the LTX-2.5 transformer flags of the golden LTX-2.5 set. Each cell is
`transformer mode / text-encoder mode` (`ltx_core.offload_auto`), or "no" when no mode fits.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltx_core.generation_memory import (
    GenerationSizes,
    GenerationWorkload,
    TextEncoderSize,
    generation_sizes,
    text_encoder_size_from_config,
    video_workload,
)
from ltx_core.offload_auto import OffloadChoice, choose_offload

CARD_GIB = (8, 12, 16, 24, 32, 48, 80)
HOST_RAM_GIB = 64
"""Host RAM the table assumes free beside the card (what streaming from RAM and the decoded clip use)."""
KEYS_FILE = "ltx-2.3-22b-keys.json"
LTX25_MANIFEST = Path("ltx-2.5") / "manifest.json"

# google/gemma-3-12b(-it) config.json: the sizes the key list's `gemma_text_config` leaves out, and the
# SigLIP vision tower the multimodal class loads beside the text model.
GEMMA3_12B_TEXT = {
    "intermediate_size": 15360,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "vocab_size": 262208,
}
GEMMA3_12B_VISION = {
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "image_size": 896,
    "patch_size": 14,
}
LTX25_TRANSFORMER_FLAGS = (
    "ff_bias",
    "audio_ff_bias",
    "connector_ff_bias",
    "use_prompt_adaln_single",
    "use_keyframes_abs_pos_embedding",
)


@dataclass(frozen=True)
class TableRun:
    label: str
    sizes: GenerationSizes
    height: int
    width: int
    frames: int
    frame_rate: float = 24.0

    def workload(self) -> GenerationWorkload:
        shape = video_workload(self.height, self.width, self.frames, self.frame_rate)
        return GenerationWorkload(shape=shape, two_stage=True, loads_video_encoder=True)


def golden_dir() -> Path:
    env = os.environ.get("LTX_GOLDEN_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[4] / "tests" / "golden"


def gemma3_12b_size(gemma_text_config: dict[str, Any]) -> TextEncoderSize:
    text = {"model_type": "gemma3_text", **GEMMA3_12B_TEXT, **gemma_text_config}
    vision = {"model_type": "siglip_vision_model", **GEMMA3_12B_VISION}
    return text_encoder_size_from_config({"model_type": "gemma3", "text_config": text, "vision_config": vision})


def released_runs(golden: Path) -> list[TableRun]:
    released = json.loads((golden / KEYS_FILE).read_text())
    config = released["config"]
    gemma = gemma3_12b_size(released["gemma_text_config"])
    sizes_23 = generation_sizes(config, gemma, upsampler_config={})
    runs = [
        TableRun("LTX-2.3 22B distilled, 768x512x121", sizes_23, 512, 768, 121),
        TableRun("LTX-2.3 22B distilled, 1280x704x121", sizes_23, 704, 1280, 121),
    ]
    manifest = golden / LTX25_MANIFEST
    if manifest.is_file():
        flags = json.loads(manifest.read_text())["config"]["transformer"]
        config_25 = json.loads(json.dumps(config))
        config_25["transformer"].update({k: flags[k] for k in LTX25_TRANSFORMER_FLAGS if k in flags})
        # Gemma 4's released config is not in the golden sets: Gemma 3 12B's sizes stand in for it.
        sizes_25 = generation_sizes(config_25, gemma, upsampler_config={})
        runs.append(TableRun("LTX-2.5 22B distilled, 768x512x121", sizes_25, 512, 768, 121))
    return runs


def choices(run: TableRun, cards: Sequence[int] = CARD_GIB) -> list[OffloadChoice]:
    return [
        choose_offload(
            run.sizes, run.workload(), free_bytes=gib * 2**30, free_host_bytes=HOST_RAM_GIB * 2**30,
            dtype=torch.bfloat16,
        )
        for gib in cards
    ]  # fmt: skip


def markdown_table(runs: Sequence[TableRun], cards: Sequence[int] = CARD_GIB) -> str:
    header = "| run | " + " | ".join(f"{gib} GB" for gib in cards) + " |"
    rule = "|---|" + "---|" * len(cards)
    rows = [f"| {run.label} | " + " | ".join(c.cell() for c in choices(run, cards)) + " |" for run in runs]
    return "\n".join([header, rule, *rows])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden-dir", type=Path, default=None, help="where ltx-2.3-22b-keys.json is")
    parser.add_argument("--explain", action="store_true", help="print each cell's reasons too")
    args = parser.parse_args(argv)
    runs = released_runs(args.golden_dir or golden_dir())
    print(markdown_table(runs))
    if args.explain:
        for run in runs:
            for gib, choice in zip(CARD_GIB, choices(run)):
                print(f"\n{run.label}, {gib} GB: {choice.estimate.describe()}")
                for line in choice.log_lines():
                    print("  " + line)


if __name__ == "__main__":
    main()
