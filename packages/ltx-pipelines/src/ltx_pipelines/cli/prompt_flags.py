"""The prompt flag group: `--prompt`, `--seed`, `--enhance-prompt` and `--prompt-enhancer-gemma-root`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.engine.defaults import PipelineDefaults

if TYPE_CHECKING:
    from ltx_pipelines.cli.model_resolution import RunModels

_SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


@dataclass(frozen=True)
class PromptChoice:
    text: str
    seed: int
    enhance: bool
    enhancer: str | Path | None = None
    """The separate enhancer Gemma (`--prompt-enhancer-gemma-root`): a local path, or hf:// until settled."""


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
        group.add_argument(
            "--prompt-enhancer-gemma-root",
            default=None,
            metavar="PATH",
            help="With --enhance-prompt: another Gemma that rewrites the prompt (a Gemma folder or a packed "
            "Gemma 4 file, e.g. a dense Gemma 4 instruction model; greedy for Gemma 4), a path or hf://; "
            "default: the text encoder rewrites it.",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> PromptChoice:
        from ltx_pipelines.cli.hf_paths import is_hf_path

        seed = context.defaults.seed if args.seed is None else args.seed
        if not _SEED_RANGE[0] <= seed <= _SEED_RANGE[1]:
            raise FlagError(f"--seed {seed} is out of range [{_SEED_RANGE[0]}, {_SEED_RANGE[1]}]")
        if not args.prompt.strip():
            raise FlagError("--prompt is empty; describe the video to generate")
        enhancer = args.prompt_enhancer_gemma_root
        if enhancer is not None:
            if not args.enhance_prompt:
                raise FlagError("--prompt-enhancer-gemma-root only rewrites prompts with --enhance-prompt; add it")
            if not is_hf_path(enhancer):
                enhancer = Path(enhancer).expanduser().absolute()
                if not enhancer.exists():
                    raise FlagError(
                        f"--prompt-enhancer-gemma-root {str(enhancer)!r} does not exist (a Gemma folder or a packed "
                        "Gemma 4 .safetensors file)"
                    )
        return PromptChoice(text=args.prompt, seed=int(seed), enhance=bool(args.enhance_prompt), enhancer=enhancer)

    def settle(self, value: PromptChoice, models: RunModels, context: ReadContext) -> PromptChoice:
        from ltx_pipelines.cli.hf_paths import HfPathError, is_hf_path, resolve_model_path

        if value.enhancer is None or not is_hf_path(value.enhancer):
            return value
        is_file = str(value.enhancer).endswith(".safetensors")
        try:
            return replace(value, enhancer=resolve_model_path(value.enhancer, folder=not is_file))
        except HfPathError as e:
            raise FlagError(f"--prompt-enhancer-gemma-root: {e}") from None

    def record(self, value: PromptChoice) -> dict[str, Any]:
        enhancer = None if value.enhancer is None else str(value.enhancer)
        return {
            "prompt": value.text,
            "seed": value.seed,
            "enhance_prompt": value.enhance,
            "prompt_enhancer_gemma_root": enhancer,
        }

    def call_arguments(self, value: PromptChoice) -> dict[str, Any]:
        return {"seed": value.seed, "enhance_prompt": value.enhance}

    def memory_inputs(self, value: PromptChoice) -> dict[str, Any]:
        return {"enhance": value.enhance}

    def pipeline_options(self, value: PromptChoice) -> dict[str, Any]:
        return {} if value.enhancer is None else {"prompt_enhancer_gemma_root": value.enhancer}
