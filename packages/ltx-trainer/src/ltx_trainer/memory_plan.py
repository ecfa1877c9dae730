"""`python -m ltx_trainer.memory_plan CHECKPOINT --video-tokens N ...`: the peak memory of a LoRA training
run estimated from the checkpoint's config (`training.memory_estimate`), and which card sizes it fits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ltx_trainer.training.memory_estimate import (
    QUANTIZED_BYTES_PER_VALUE,
    TrainingMemoryError,
    TrainingSettings,
    TrainingShape,
    check_training_fits,
    estimate_training_memory,
)

_GIB = 2**30


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m ltx_trainer.memory_plan CHECKPOINT_OR_CONFIG_JSON ...`: the estimate for a card size."""
    from ltx_core.command_parser import CommandParser

    parser = CommandParser(
        prog="python -m ltx_trainer.memory_plan", description="Estimate the peak memory of a LoRA training run."
    )
    parser.add_argument("checkpoint", type=Path, help="a .safetensors checkpoint or a JSON file with its 'config'")
    parser.add_argument("--video-tokens", type=int, required=True)
    parser.add_argument("--audio-tokens", type=int, default=0)
    parser.add_argument("--text-tokens", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=1, help="dataset size (whether its contexts fit the cache)")
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--quantization", default=None, choices=sorted(QUANTIZED_BYTES_PER_VALUE))
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--optimizer", default="adamw", choices=["adamw", "adamw8bit"])
    parser.add_argument("--blocks-to-swap", type=int, default=0, help="frozen blocks kept off the device")
    parser.add_argument("--swap-source", default="ram", choices=["ram", "disk"])
    parser.add_argument("--offload-activations", action="store_true")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--card-gib", type=float, nargs="*", default=[], help="check these card sizes")
    args = parser.parse_args(argv)
    if args.checkpoint.suffix == ".json":
        checkpoint_config = json.loads(args.checkpoint.read_text())["config"]
    else:
        from ltx_core.loader import read_checkpoint_config

        checkpoint_config = {"transformer": read_checkpoint_config(args.checkpoint, "transformer")}
    settings = TrainingSettings(
        lora_rank=args.rank,
        quantization=args.quantization,
        gradient_checkpointing=args.gradient_checkpointing,
        optimizer=args.optimizer,
        with_audio=args.audio_tokens > 0,
        blocks_to_swap=args.blocks_to_swap,
        swap_source=args.swap_source,
        offload_activations=args.offload_activations,
    )
    shape = TrainingShape(args.video_tokens, args.audio_tokens, args.text_tokens, samples=args.samples)
    estimate = estimate_training_memory(checkpoint_config, settings, shape, args.device)
    print(estimate.describe())
    for gib in args.card_gib:
        try:
            check_training_fits(checkpoint_config, settings, shape, int(gib * _GIB), args.device)
            print(f"{gib:g} GiB: fits")
        except TrainingMemoryError as err:
            print(f"{gib:g} GiB: {err}")


if __name__ == "__main__":
    main()
