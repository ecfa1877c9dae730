"""`python -m ltx_trainer.serve_captioner`: start (or print the command for) a vLLM server with Qwen3-Omni.

vLLM runs through `uvx` in its own environment, so its CUDA dependencies never touch this one.
Leave it running and caption in another terminal with `caption_videos` (its --vllm-url default
matches this server's default address).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import typer

from ltx_trainer.cli.app import configure_logging, new_app

DEFAULT_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Thinking"
DEFAULT_VLLM_SPEC = "vllm[audio]==0.11.2"
QUANTIZATIONS = ("fp8", "bf16")

app = new_app("Serve the captioning model with vLLM (OpenAI-compatible API).")


def vllm_command(
    *,
    model: str = DEFAULT_MODEL,
    host: str = "127.0.0.1",
    port: int = 8001,
    quantization: str = "fp8",
    vllm_spec: str = DEFAULT_VLLM_SPEC,
    max_model_len: int = 32768,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int = 4,
) -> list[str]:
    """The command line that serves `model` (fp8: dynamic FP8 weights, about 31 GiB; bf16: about 66 GiB)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization {quantization!r}; accepted: {', '.join(QUANTIZATIONS)}")
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be in 1..65535; got {port}")
    command = [
        "uvx",
        "--from",
        vllm_spec,
        "vllm",
        "serve",
        model,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        "bfloat16",
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        str(gpu_memory_utilization),
        "--max-num-seqs",
        str(max_num_seqs),
        "--allowed-local-media-path",
        "/",
        "--limit-mm-per-prompt",
        '{"image": 64, "video": 1, "audio": 1}',
    ]
    if quantization == "fp8":
        command += ["--quantization", "fp8"]
    return command


@app.command()
def main(
    host: str = typer.Option("127.0.0.1", help="Address to listen on"),
    port: int = typer.Option(8001, help="Port to listen on"),
    quantization: str = typer.Option("fp8", "--quantization", "-q", help="fp8 (about 31 GiB) or bf16 (about 66 GiB)"),
    model: str = typer.Option(DEFAULT_MODEL, help="Model to serve"),
    hf_home: str | None = typer.Option(None, help="Where the model is downloaded (HF_HOME)"),
    vllm_spec: str = typer.Option(DEFAULT_VLLM_SPEC, help="vLLM requirement given to uvx --from"),
    print_cmd: bool = typer.Option(False, help="Print the command instead of running it"),
) -> None:
    configure_logging()
    try:
        command = vllm_command(model=model, host=host, port=port, quantization=quantization, vllm_spec=vllm_spec)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    env_prefix = f"HF_HOME={shlex.quote(hf_home)} " if hf_home else ""
    if print_cmd:
        typer.echo(env_prefix + shlex.join(command))
        return
    if shutil.which("uvx") is None:
        typer.echo("error: uvx is not on PATH; install uv (https://docs.astral.sh/uv/) or use --print-cmd", err=True)
        raise typer.Exit(2)
    env = dict(os.environ, **({"HF_HOME": hf_home} if hf_home else {}))
    raise typer.Exit(subprocess.call(command, env=env))


if __name__ == "__main__":
    app()
