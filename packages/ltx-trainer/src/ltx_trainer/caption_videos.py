"""`python -m ltx_trainer.caption_videos INPUT -o dataset.json`: caption every video (or image) under INPUT.

Output rows are `{"caption": ..., "media_path": ...}` with paths relative to the output file, in
JSON, JSONL, CSV or TXT by the output's extension. The file is rewritten (atomically) every few
captions, so an interrupted run keeps its work; a rerun skips media that already have a caption
unless --override.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import typer

from ltx_pipelines.io.progress import progress
from ltx_trainer.captioning.base import DEFAULT_INSTRUCTION, Captioner
from ltx_trainer.cli_support import configure_logging, exit_if_nothing_done, new_app, run_or_exit
from ltx_trainer.dataset_file import DatasetFileError, read_dataset, write_records
from ltx_trainer.drop_report import RunReport

logger = logging.getLogger(__name__)

CAPTIONERS = ("qwen_omni", "gemini_flash", "transformers")
DEFAULT_EXTENSIONS = "mp4,mov,mkv,avi,webm,m4v,png,jpg,jpeg,webp"
OUTPUT_SUFFIXES = (".json", ".jsonl", ".csv", ".txt")

app = new_app("Caption videos (with their audio) or images with a multimodal model.")


def find_media(input_path: Path, extensions: Sequence[str], recursive: bool) -> list[Path]:
    if input_path.is_file():
        return [input_path]
    if not input_path.is_dir():
        raise FileNotFoundError(f"input {str(input_path)!r} does not exist")
    wanted = {"." + e.lower().lstrip(".") for e in extensions}
    pattern = "**/*" if recursive else "*"
    return sorted(p for p in input_path.glob(pattern) if p.is_file() and p.suffix.lower() in wanted)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def caption_media(
    media: Sequence[Path],
    output: str | Path,
    captioner: Captioner,
    *,
    override: bool = False,
    save_every: int = 5,
    num_workers: int = 1,
) -> RunReport:
    """Caption `media` into `output`, keeping captions already there (unless `override`)."""
    out = Path(output)
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DatasetFileError(f"output {str(out)!r} must end in one of {', '.join(OUTPUT_SUFFIXES)}")
    root = out.parent
    records: dict[str, dict] = {}
    if out.exists() and out.suffix.lower() != ".txt":
        for row in read_dataset(out).rows:
            path = row.get("media_path")
            if path:
                records[path] = dict(row.values)
    report = RunReport()
    todo: list[tuple[str, Path]] = []
    for path in media:
        key = _relative(path, root)
        if not override and (records.get(key) or {}).get("caption"):
            report.skip("caption")
        else:
            todo.append((key, path))
    if not todo:
        return report

    pending = 0

    def save() -> None:
        write_records(out, list(records.values()), overwrite=True)

    def work(item: tuple[str, Path]) -> tuple[str, Path, str | None, str | None]:
        key, path = item
        try:
            return key, path, captioner.caption(path), None
        except Exception as e:  # one bad file must not end the run; it is reported at the end
            return key, path, None, f"{type(e).__name__}: {e}"

    runner: Callable = map
    pool = ThreadPoolExecutor(max_workers=num_workers) if num_workers > 1 else None
    if pool is not None:
        runner = pool.map
    try:
        for key, _path, caption, error in progress(
            runner(work, todo), desc=f"captions ({captioner.name})", total=len(todo), unit="file"
        ):
            if error is not None:
                report.drop("caption", key, error)
                continue
            records[key] = {**records.get(key, {}), "caption": caption, "media_path": key}
            report.wrote("caption")
            pending += 1
            if pending >= save_every:
                save()
                pending = 0
    finally:
        # Also on Ctrl-C or a crash: what was captioned so far is kept.
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if pending:
            save()
    return report


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
