"""Demo substitution: `--demo` runs on the demo set's model files (`ensure_demo_assets`, built on first use)
wherever the user named none (`with_demo_files`), and its output says which released files to use instead
(`real_weights_help`)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from ltx_core.loader.lora_spec import LoraSpec
from ltx_pipelines.engine.defaults import DEFAULT_DEMO_FAMILY

if TYPE_CHECKING:
    from ltx_pipelines.cli.model_flags import ModelChoice, ModelFlags

logger = logging.getLogger(__name__)


def with_demo_files(flags: ModelFlags, choice: ModelChoice) -> ModelChoice:
    """`choice` with the demo model files wherever the user gave none (built on first use)."""
    from ltx_pipelines.demo import ensure_demo_assets

    # One line here; how to get the released files is said once, with the output (`write_decoded`).
    logger.warning("--demo: the models are tiny and random, so the output is noise")
    if choice.demo_family == "ltx-2.5":
        return _with_ltx25_demo_files(flags, choice)
    assets = ensure_demo_assets()
    # Pipelines with a distilled LoRA run the demo's stage 2 without one.
    return replace(
        choice,
        checkpoint=choice.checkpoint or str(assets.checkpoint),
        gemma_root=(choice.gemma_root or str(assets.gemma_root)) if flags.gemma else None,
        spatial_upsampler=(choice.spatial_upsampler or str(assets.spatial_upsampler)) if flags.two_stage else None,
    )


def _with_ltx25_demo_files(flags: ModelFlags, choice: ModelChoice) -> ModelChoice:
    """`choice` with the LTX-2.5 demo's component files wherever the user gave none."""
    from ltx_pipelines.demo import ensure_demo_assets

    assets = ensure_demo_assets(family="ltx-2.5")
    loras = choice.loras
    if not loras and flags.demo_ic_lora is not None:
        loras = (LoraSpec(getattr(assets, flags.demo_ic_lora)),)
    return replace(
        choice,
        loras=loras,
        transformer=choice.transformer or str(assets.transformer),
        text_encoder=(choice.text_encoder or str(assets.text_encoder)) if flags.gemma else choice.text_encoder,
        video_vae=(choice.video_vae or str(assets.video_vae)) if flags.video else choice.video_vae,
        audio_vae=choice.audio_vae or str(assets.audio_vae),
        duration_head=choice.duration_head or str(assets.duration_head),
        spatial_upsampler=(choice.spatial_upsampler or str(assets.spatial_upsampler)) if flags.two_stage else None,
    )


def real_weights_help(flags: ModelFlags, family: str = DEFAULT_DEMO_FAMILY) -> str:
    """What to download (the released file names) and pass instead of the demo's random weights."""
    if family == "ltx-2.5":
        return ltx25_weights_help(distilled=flags.distilled, two_stage=flags.two_stage)
    if flags.distilled:
        files, names_of_flags = ["ltx-2.3-22b-distilled-1.1.safetensors"], ["--distilled-checkpoint-path"]
    else:
        files, names_of_flags = ["ltx-2.3-22b-dev.safetensors"], ["--checkpoint-path"]
    if flags.two_stage:
        files.append("ltx-2.3-spatial-upscaler-x2-1.1.safetensors")
        names_of_flags.append("--spatial-upsampler-path")
    if flags.distilled_lora:
        files.append("ltx-2.3-22b-distilled-lora-384-1.1.safetensors")
        names_of_flags.append("--distilled-lora")
    names_of_flags.append("--gemma-root")
    names = " \\\n      ".join(files)
    return (
        "Demo weights are random: the output is noise. For real videos, download the released files, e.g.\n"
        f"  uv run hf download Lightricks/LTX-2.3 {names} --local-dir models/ltx-2.3\n"
        "  uv run hf download google/gemma-3-12b-it-qat-q4_0-unquantized --local-dir models/gemma-3-12b\n"
        f"and pass them with {', '.join(names_of_flags[:-1])} and {names_of_flags[-1]}\n"
        "(hf://<org>/<repo>/<file> paths work too)."
    )


LTX25_REPO = "Lightricks/LTX-2.5"


def ltx25_weights_help(*, distilled: bool, two_stage: bool) -> str:
    """The LTX-2.5 download command (one file per component) and the flags that take each file."""
    kind = "distilled" if distilled else "dev"
    files = {
        "--transformer-path": f"diffusion_models/ltx-2.5-22b-{kind}-transformer-bf16.safetensors",
        "--text-encoder-path": "text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors",
        "--video-vae-path": "vae/ltx-2.5-video-vae-bf16.safetensors",
        "--audio-vae-path": "vae/ltx-2.5-audio-vae-bf16.safetensors",
        "--duration-head-path": "model_patches/ltx-2.5-duration-head-bf16.safetensors",
    }
    if two_stage:
        upsampler = "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"
        files["--spatial-upsampler-path"] = f"latent_upscale_models/{upsampler}"
    names = " \\\n      ".join(files.values())
    flags = " \\\n      ".join(f"{flag} models/ltx-2.5/{name}" for flag, name in files.items())
    return (
        "Demo weights are random: the output is noise. For real videos, download the released files, e.g.\n"
        f"  uv run hf download {LTX25_REPO} {names} --local-dir models/ltx-2.5\n"
        f"and pass them with\n      {flags}\n"
        "(hf://<org>/<repo>/<file> paths work too)."
    )
