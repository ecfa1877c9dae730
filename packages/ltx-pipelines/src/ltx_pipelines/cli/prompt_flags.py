"""The prompt flag group: `--prompt`, `--seed` and `--enhance-prompt`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.engine.defaults import PipelineDefaults

_SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


@dataclass(frozen=True)
class PromptChoice:
    text: str
    seed: int
    enhance: bool


class PromptFlags(FlagGroup[PromptChoice]):
    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("prompt")
        group.add_argument(
            "--prompt", type=str, required=True, help="Text describing the video (and audio) to generate."
        )
        group.add_argument(
            "--seed",
            type=int,
            default=None,
            help=f"Random seed; the same seed gives the same result (default: {defaults.seed}).",
        )
        group.add_argument(
            "--enhance-prompt",
            action="store_true",
            help="Rewrite the prompt with the Gemma model into a detailed description before encoding it.",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> PromptChoice:
        seed = context.defaults.seed if args.seed is None else args.seed
        if not _SEED_RANGE[0] <= seed <= _SEED_RANGE[1]:
            raise FlagError(f"--seed {seed} is out of range [{_SEED_RANGE[0]}, {_SEED_RANGE[1]}]")
        if not args.prompt.strip():
            raise FlagError("--prompt is empty; describe the video to generate")
        return PromptChoice(text=args.prompt, seed=int(seed), enhance=bool(args.enhance_prompt))

    def record(self, value: PromptChoice) -> dict[str, Any]:
        return {"prompt": value.text, "seed": value.seed, "enhance_prompt": value.enhance}
