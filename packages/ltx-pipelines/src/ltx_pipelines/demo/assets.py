"""The demo model sets in the user cache: built once, verified on every use, repaired when damaged.

Each family's files are built once and cached under the user cache directory, with a manifest of their
sizes and hashes: a cache that is partial or corrupted (a killed build, a truncated copy) is rebuilt, and
two processes that start at once build it only once (the build holds an advisory lock).

Demo substitution: `--demo` runs on the demo set's model files (`ensure_demo_assets`, built on first use)
wherever the user named none (`with_demo_files`), and its output says which released files to use instead
(`real_weights_help`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from ltx_core.loader.lora_spec import LoraSpec
from ltx_pipelines.demo.files import PARTIAL_MARK
from ltx_pipelines.demo.ltx23 import DEMO_VERSION, DemoAssets, demo_assets_at
from ltx_pipelines.demo.ltx25 import DEMO_LTX25_VERSION, Ltx25DemoAssets, ltx25_demo_assets_at
from ltx_pipelines.engine.model_versions import DEFAULT_DEMO_FAMILY, DEMO_FAMILIES
from ltx_pipelines.io.atomic_files import atomic_output, remove_stale_partials

if TYPE_CHECKING:
    from ltx_pipelines.cli.model_flags import ModelChoice, ModelFlags

logger = logging.getLogger(__name__)


AnyDemoAssets = DemoAssets | Ltx25DemoAssets


MANIFEST_NAME = "manifest.json"


_LOCK_NAME = ".build.lock"


def _check_family(family: str) -> str:
    if family not in DEMO_FAMILIES:
        raise ValueError(f"unknown demo model family {family!r}; accepted: {', '.join(DEMO_FAMILIES)}")
    return family


def _family_version(family: str) -> str:
    """The version a family's manifest records (a cache of another version is rebuilt)."""
    if family == "ltx-2.5":
        return f"ltx-2.5-v{DEMO_LTX25_VERSION}"
    return DEMO_VERSION


def default_demo_dir(family: str = DEFAULT_DEMO_FAMILY) -> Path:
    """The user-cache folder of a family's demo set (LTX-2.3 keeps the folder it always had)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "ltx2-demo"
    if _check_family(family) == "ltx-2.5":
        return base / _family_version(family)
    return base / f"v{DEMO_VERSION}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _describe(root: Path, part_path: Path) -> dict[str, dict[str, Any]]:
    files = sorted(p for p in part_path.rglob("*") if p.is_file()) if part_path.is_dir() else [part_path]
    return {str(f.relative_to(root)): {"bytes": f.stat().st_size, "sha256": _sha256(f)} for f in files}


def _intact(root: Path, files: Any) -> bool:
    if not isinstance(files, dict) or not files:
        return False
    for name, expected in files.items():
        path = root / name
        try:
            if path.stat().st_size != expected["bytes"] or _sha256(path) != expected["sha256"]:
                return False
        except (OSError, KeyError, TypeError):
            return False
    return True


def _version_of(assets: AnyDemoAssets) -> str:
    return _family_version("ltx-2.3" if isinstance(assets, DemoAssets) else "ltx-2.5")


def stale_parts(root: Path, assets: AnyDemoAssets) -> list[str]:
    """Names of the parts that are missing, partial or differ from the manifest (all of them when the
    manifest itself is missing or unreadable)."""
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
        recorded = manifest["parts"] if manifest.get("demo_version") == _version_of(assets) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        recorded = {}
    return [name for name in assets.parts if not _intact(root, recorded.get(name))]


def _write_manifest(root: Path, assets: AnyDemoAssets) -> None:
    parts = {name: _describe(root, path) for name, (path, _) in assets.parts.items()}
    text = json.dumps({"demo_version": _version_of(assets), "parts": parts}, indent=2, sort_keys=True) + "\n"
    with atomic_output(root / MANIFEST_NAME, overwrite=True) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _remove_leftovers(root: Path) -> None:
    # Called with the build lock held: any partial file or folder is from a build that died.
    remove_stale_partials(root, min_age_s=0.0)
    for leftover in root.glob(f".*{PARTIAL_MARK}"):
        logger.info("removing %s, left by an interrupted demo build", leftover)
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """An exclusive advisory lock on `root` (fcntl.flock; per open file, so threads exclude each other too)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): concurrent builds then only cost time, the renames stay atomic
        yield
        return
    with (root / _LOCK_NAME).open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process that is building the demo models in %s", root)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@overload
def ensure_demo_assets(root: Path | None = None, *, family: Literal["ltx-2.3"] = ...) -> DemoAssets: ...


@overload
def ensure_demo_assets(root: Path | None = None, *, family: Literal["ltx-2.5"]) -> Ltx25DemoAssets: ...


@overload
def ensure_demo_assets(root: Path | None = None, *, family: str) -> AnyDemoAssets: ...


def ensure_demo_assets(root: Path | None = None, *, family: str = DEFAULT_DEMO_FAMILY) -> AnyDemoAssets:
    """The demo model set of `family` under `root` (default: the user cache), built or repaired where
    needed: `DemoAssets` for `ltx-2.3` (single file, upsampler, Gemma 3 folder), `Ltx25DemoAssets` for
    `ltx-2.5` (split component files; `.model_files()` is the set the pipelines take).

    A complete cache is only verified (sizes and hashes against its manifest). Otherwise the missing
    or damaged parts are rebuilt under a lock, so concurrent callers build once and never see a
    half-written file; the manifest is written last.
    """
    _check_family(family)
    root = Path(root) if root is not None else default_demo_dir(family)
    root.mkdir(parents=True, exist_ok=True)
    assets: AnyDemoAssets = ltx25_demo_assets_at(root) if family == "ltx-2.5" else demo_assets_at(root)
    if not stale_parts(root, assets):
        return assets
    with _build_lock(root):
        stale = stale_parts(root, assets)  # another process may have finished the build while we waited
        if stale:
            _remove_leftovers(root)
            logger.info("building demo models (%s) in %s", ", ".join(stale), root)
            parts = assets.parts
            for name in stale:
                path, write = parts[name]
                write(path)
            _write_manifest(root, assets)
    return assets


def with_demo_files(flags: ModelFlags, choice: ModelChoice) -> ModelChoice:
    """`choice` with the demo model files wherever the user gave none (built on first use)."""
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
