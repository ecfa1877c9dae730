"""`python -m ltx_trainer.caption_videos INPUT -o dataset.json`: caption every video (or image) under INPUT.

The output file's format and how an interrupted run resumes: `captioning.captions_file`; a rerun skips
media that already have a caption unless --override.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ltx_trainer.captioning.base import DEFAULT_INSTRUCTION, Captioner
from ltx_trainer.captioning.captions_file import caption_media
from ltx_trainer.cli.app import configure_logging, new_app
from ltx_trainer.cli.errors import exit_if_nothing_done, run_or_exit
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.media import DEFAULT_EXTENSIONS, find_media

logger = logging.getLogger(__name__)

CAPTIONERS = ("qwen_omni", "gemini_flash", "transformers")

app = new_app("Caption videos (with their audio) or images with a multimodal model.")


def make_captioner(
    kind: str,
    *,
    instruction: str,
    max_tokens: int,
    fps: float,
    vllm_url: str,
    vllm_model: str,
    enable_thinking: bool,
    api_key: str | None,
    gemini_model: str,
    local_model: str | None,
    device: str | None,
) -> Captioner:
    if kind == "qwen_omni":
        from ltx_trainer.captioning.openai_compatible import OpenAICompatibleCaptioner

        return OpenAICompatibleCaptioner(
            base_url=vllm_url,
            model=vllm_model,
            instruction=instruction,
            max_tokens=max_tokens,
            fps=fps,
            enable_thinking=enable_thinking,
            api_key=api_key,
        )
    if kind == "gemini_flash":
        from ltx_trainer.captioning.gemini import GeminiCaptioner

        return GeminiCaptioner(model=gemini_model, instruction=instruction, max_tokens=max_tokens, api_key=api_key)
    if kind == "transformers":
        from ltx_trainer.captioning.local_model import TransformersCaptioner

        if not local_model:
            raise typer.BadParameter("--captioner-type transformers needs --local-model (a model id or folder)")
        return TransformersCaptioner(local_model, instruction=instruction, max_tokens=max_tokens, device=device)
    raise typer.BadParameter(f"--captioner-type {kind!r}; accepted: {', '.join(CAPTIONERS)}")


@app.command()
def main(
    input_path: Path = typer.Argument(..., help="A video/image file or a folder of them"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Output .json/.jsonl/.csv/.txt [default: <input folder>/dataset.json]"
    ),
    captioner_type: str = typer.Option("qwen_omni", "--captioner-type", "-c", help=f"Backend: {'|'.join(CAPTIONERS)}"),
    vllm_url: str = typer.Option("http://127.0.0.1:8001/v1", help="OpenAI-compatible server (qwen_omni)"),
    vllm_model: str = typer.Option("Qwen/Qwen3-Omni-30B-A3B-Thinking", help="Model name on that server"),
    enable_thinking: bool = typer.Option(False, help="Let a thinking model reason before answering (slower)"),
    max_tokens: int = typer.Option(4096, help="Longest answer, in tokens"),
    instruction: str = typer.Option(DEFAULT_INSTRUCTION, "--instruction", "-i", help="Prompt given to the captioner"),
    extensions: str = typer.Option(DEFAULT_EXTENSIONS, "--extensions", "-e", help="File extensions to caption"),
    recursive: bool = typer.Option(False, "--recursive", "-r", help="Search INPUT's subfolders too"),
    fps: float = typer.Option(2.0, "--fps", "-f", help="Frames per second shown to the captioner"),
    override: bool = typer.Option(False, help="Caption again media that already have a caption"),
    api_key: str | None = typer.Option(None, help="API key [default: GEMINI_API_KEY / GOOGLE_API_KEY for Gemini]"),
    gemini_model: str = typer.Option("gemini-3.5-flash", help="Gemini model (gemini_flash)"),
    local_model: str | None = typer.Option(None, help="transformers model id or folder (transformers)"),
    device: str | None = typer.Option(None, help="Device for the transformers captioner"),
    num_workers: int = typer.Option(1, "--num-workers", "-w", help="Parallel requests, 1..10 (gemini_flash only)"),
    verbose: bool = typer.Option(False, help="Debug logging"),
) -> None:
    configure_logging(verbose)

    def work() -> RunReport:
        if not 1 <= num_workers <= 10:
            raise typer.BadParameter(f"--num-workers must be in 1..10; got {num_workers}")
        if num_workers > 1 and captioner_type != "gemini_flash":
            raise typer.BadParameter("--num-workers > 1 is only for gemini_flash (local models run one at a time)")
        media = find_media(input_path, extensions.split(","), recursive)
        target = output or ((input_path if input_path.is_dir() else input_path.parent) / "dataset.json")
        captioner = make_captioner(
            captioner_type,
            instruction=instruction,
            max_tokens=max_tokens,
            fps=fps,
            vllm_url=vllm_url,
            vllm_model=vllm_model,
            enable_thinking=enable_thinking,
            api_key=api_key,
            gemini_model=gemini_model,
            local_model=local_model,
            device=device,
        )
        logger.info("captioning %d file(s) into %s", len(media), target)
        return caption_media(media, target, captioner, override=override, num_workers=num_workers)

    report = run_or_exit(work)
    report.print()
    exit_if_nothing_done(report, "every caption", "is the captioning server reachable (or the API key set)?")


if __name__ == "__main__":
    app()
