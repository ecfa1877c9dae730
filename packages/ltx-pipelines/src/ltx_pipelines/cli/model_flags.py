"""The model-files flag group: the LTX checkpoint (`--checkpoint-path` or `--distilled-checkpoint-path`),
`--gemma-root`, the two-stage files (`--spatial-upsampler-path`, `--distilled-lora`) and the LoRAs (`--lora`,
`--lora-fusion-precision`).

Reading it checks what needs no download (required flags, local files exist, the Gemma folder); `resolve`
then fetches hf:// paths and reads each file's header to check it is the kind its flag expects.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ltx_core.loader import DEFAULT_LORA_FUSION, CheckpointError, LoraFusionPrecision, LoraSpec
from ltx_core.loader.model_files import names_a_model_folder
from ltx_core.text_encoders.gemma.folder import locate_gemma_folder
from ltx_pipelines.cli.arg_types import LoraAction
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext, finite
from ltx_pipelines.cli.hf_paths import HfPathError, cached_hf_file, is_hf_path, resolve_model_path
from ltx_pipelines.engine.checkpoint_kind import ExpectedKind, check_checkpoint_kind
from ltx_pipelines.engine.defaults import (
    DEFAULT_LORA_STRENGTH,
    LTX_2_3_DEFAULTS,
    PipelineDefaults,
    defaults_for_checkpoint,
    normalize_model_version,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelChoice:
    """The model files as the command line names them (local paths or hf:// strings), checked cheaply."""

    checkpoint: str | None
    gemma_root: str | None
    spatial_upsampler: str | None = None
    loras: tuple[LoraSpec, ...] = ()
    distilled_lora: LoraSpec | None = None
    lora_fusion: LoraFusionPrecision = DEFAULT_LORA_FUSION


@dataclass(frozen=True)
class RunModels:
    """The model files of a run, local and checked, with what their headers say."""

    checkpoint: Path
    gemma_root: Path | None
    spatial_upsampler: Path | None = None
    loras: tuple[LoraSpec, ...] = ()
    distilled_lora: LoraSpec | None = None
    lora_fusion: LoraFusionPrecision = DEFAULT_LORA_FUSION
    metadata: dict[str, Any] = field(default_factory=dict)
    """The checkpoint's safetensors metadata (empty when kinds were not checked)."""
    choice: ModelChoice | None = None
    """The files as named on the command line (recorded in the sidecar)."""
    demo: bool = False
    """Whether `--demo` substituted any of them."""

    @property
    def model_version(self) -> tuple[int, ...]:
        return normalize_model_version(self.metadata.get("model_version"))

    @property
    def transformer_config(self) -> dict[str, Any]:
        return (self.metadata.get("config") or {}).get("transformer") or {}

    @property
    def num_layers(self) -> int | None:
        layers = self.transformer_config.get("num_layers")
        return int(layers) if isinstance(layers, int) else None

    def files(self) -> dict[str, Path]:
        """The model files by role, for the sidecar (a pipeline without an upsampler lists none)."""
        given = {
            "checkpoint": self.checkpoint,
            "spatial_upsampler": self.spatial_upsampler,
            "gemma_root": self.gemma_root,
        }
        files = {role: path for role, path in given.items() if path is not None}
        for i, lora in enumerate(self.loras):
            files[f"lora_{i}"] = Path(lora.path)
        if self.distilled_lora is not None:
            files["distilled_lora"] = Path(self.distilled_lora.path)
        return files


@dataclass(frozen=True)
class ModelFlags(FlagGroup[ModelChoice]):
    """`distilled`: the checkpoint flag is `--distilled-checkpoint-path`. `two_stage`: the spatial upsampler
    flag (and `--distilled-lora` with `distilled_lora`). `gemma`: the prompt encoder's folder flag."""

    distilled: bool
    two_stage: bool = False
    distilled_lora: bool = False
    gemma: bool = True
    loras: bool = True
    """`--lora` and `--lora-fusion-precision`."""
    hf_cache_dir: str | Path | None = None
    hf_offline: bool | None = None
    check_kinds: bool = True
    """False skips reading the model headers (tests of the other rules)."""
    lora_help: str | None = None
    """What `--lora` means where a pipeline narrows it (e.g. IC-LoRAs, fused into stage 1 only)."""

    @property
    def checkpoint_flag(self) -> str:
        return "--distilled-checkpoint-path" if self.distilled else "--checkpoint-path"

    @property
    def checkpoint_dest(self) -> str:
        return self.checkpoint_flag.lstrip("-").replace("-", "_")

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("model files")
        kind = "distilled single-file checkpoint" if self.distilled else "single-file checkpoint"
        group.add_argument(
            self.checkpoint_flag,
            type=str,
            default=None,
            help=f"The LTX-2 {kind} (.safetensors) or a diffusers model folder, a path or hf://<org>/<repo>[/<file>].",
        )
        if self.gemma:
            group.add_argument(
                "--gemma-root",
                type=str,
                default=None,
                help="The Gemma 3 text encoder folder (Hugging Face layout), a path or hf://<org>/<repo>.",
            )
        if self.two_stage:
            group.add_argument(
                "--spatial-upsampler-path",
                type=str,
                default=None,
                help="The latent x2 spatial upsampler between the stages (.safetensors, or a diffusers "
                "latent_upsampler/ folder), a path or hf:// file.",
            )
        if self.distilled_lora:
            group.add_argument(
                "--distilled-lora",
                dest="distilled_lora",
                action=LoraAction,
                nargs="+",
                metavar=("PATH", "STRENGTH"),
                default=None,
                help=(
                    "The distilled LoRA fused for the second (refinement) stage, with an optional strength "
                    f"(default {DEFAULT_LORA_STRENGTH}). Example: --distilled-lora distilled-lora.safetensors 0.8"
                ),
            )
        if self.loras:
            self._add_lora_flags(parser)

    def _add_lora_flags(self, parser: argparse.ArgumentParser) -> None:
        loras = parser.add_argument_group("LoRAs")
        loras.add_argument(
            "--lora",
            dest="lora",
            action=LoraAction,
            nargs="+",
            metavar=("PATH", "STRENGTH"),
            default=[],
            help=self.lora_help
            or (
                f"A LoRA to fuse into the transformer, with an optional strength (default {DEFAULT_LORA_STRENGTH}); "
                "repeatable. Example: --lora style.safetensors 0.8 --lora hf://org/repo/other.safetensors"
            ),
        )
        loras.add_argument(
            "--lora-fusion-precision",
            choices=[p.value for p in LoraFusionPrecision],
            default=DEFAULT_LORA_FUSION.value,
            help=(
                "How LoRA updates are fused into the weights. weight-dtype: rounded in the dtype the checkpoint "
                "stores them in (bfloat16), as the reference implementation does - its outputs are reproduced. "
                "float32: accumulated in float32 without those roundings (slightly different results). "
                f"(default: {DEFAULT_LORA_FUSION.value})"
            ),
        )

    # ---- reading -----------------------------------------------------------------------------------

    def generation_defaults(self, args: argparse.Namespace) -> PipelineDefaults:
        """The defaults of the model generation the checkpoint declares (read from a local or already cached
        file's header only; none given or unreadable: LTX-2.3's)."""
        value = getattr(args, self.checkpoint_dest)
        if value is None:
            return LTX_2_3_DEFAULTS
        if is_hf_path(value):
            try:
                cached = cached_hf_file(value, cache_dir=self.hf_cache_dir)
            except ValueError:
                cached = None
            if cached is None:
                logger.info("%s is not cached yet; using LTX-2.3 defaults", value)
                return LTX_2_3_DEFAULTS
            return defaults_for_checkpoint(cached)
        path = Path(value).expanduser()
        return defaults_for_checkpoint(path) if path.exists() else LTX_2_3_DEFAULTS

    def read(self, args: argparse.Namespace, context: ReadContext) -> ModelChoice:
        loras = tuple(args.lora or []) if self.loras else ()
        for lora in loras:
            self._check_lora("--lora", lora)
        distilled_lora = None
        if self.distilled_lora:
            given = args.distilled_lora or []
            if len(given) > 1:
                raise FlagError(f"--distilled-lora was given {len(given)} times; pass it once")
            distilled_lora = given[0] if given else None
            if distilled_lora is not None:
                self._check_lora("--distilled-lora", distilled_lora)
            elif not context.demo:
                raise FlagError("--distilled-lora PATH [STRENGTH] is required by this pipeline (or pass --demo)")
        checkpoint = getattr(args, self.checkpoint_dest)
        required = [(self.checkpoint_flag, checkpoint)]
        # A diffusers folder's text_encoder/ is not read (docs/interop.md): the Gemma folder is always named.
        if self.gemma:
            required.append(("--gemma-root", args.gemma_root))
        if self.two_stage:
            required.append(("--spatial-upsampler-path", args.spatial_upsampler_path))
        for flag, value in required:
            if value is None:
                if not context.demo:
                    raise FlagError(f"{flag} is required (a local path or hf://<org>/<repo>/<file>), or pass --demo")
            elif flag == "--gemma-root":
                if not is_hf_path(value):
                    _gemma_folder(flag, Path(value).expanduser())
            elif names_a_model_folder(value):
                continue  # a diffusers folder (checkpoint, or its latent_upsampler/): checked on resolve
            else:
                _local_file(flag, value)
        return ModelChoice(
            checkpoint=checkpoint,
            gemma_root=args.gemma_root if self.gemma else None,
            spatial_upsampler=args.spatial_upsampler_path if self.two_stage else None,
            loras=loras,
            distilled_lora=distilled_lora,
            lora_fusion=LoraFusionPrecision.parse(args.lora_fusion_precision) if self.loras else DEFAULT_LORA_FUSION,
        )

    def _check_lora(self, flag: str, lora: LoraSpec) -> None:
        finite(f"{flag} {str(lora.path)!r} STRENGTH", lora.strength)
        _local_file(flag, lora.path)

    def with_demo_files(self, choice: ModelChoice) -> ModelChoice:
        """`choice` with the demo model files wherever the user gave none (built on first use)."""
        from ltx_pipelines.demo_assets import ensure_demo_assets

        logger.warning(self.real_weights_help())
        assets = ensure_demo_assets()
        # Pipelines with a distilled LoRA run the demo's stage 2 without one.
        return replace(
            choice,
            checkpoint=choice.checkpoint or str(assets.checkpoint),
            gemma_root=(choice.gemma_root or str(assets.gemma_root)) if self.gemma else None,
            spatial_upsampler=(choice.spatial_upsampler or str(assets.spatial_upsampler)) if self.two_stage else None,
        )

    def resolve(self, choice: ModelChoice, *, demo: bool = False) -> RunModels:
        """Local copies of hf:// paths (may download) and each file checked to be the kind its flag expects."""
        assert choice.checkpoint is not None, "read() requires the checkpoint unless --demo substituted one"
        checkpoint = self._resolve(
            self.checkpoint_flag, choice.checkpoint, folder=names_a_model_folder(choice.checkpoint)
        )
        metadata = self._kind(self.checkpoint_flag, checkpoint, "ltx_checkpoint")
        gemma_root = None
        if choice.gemma_root is not None:
            gemma_root = self._resolve("--gemma-root", choice.gemma_root, folder=True)
            if is_hf_path(choice.gemma_root):
                _gemma_folder("--gemma-root", gemma_root)
        upsampler = None
        if choice.spatial_upsampler is not None:
            upsampler = self._resolve(
                "--spatial-upsampler-path",
                choice.spatial_upsampler,
                folder=names_a_model_folder(choice.spatial_upsampler),
            )
            config = self._kind("--spatial-upsampler-path", upsampler, "upsampler").get("config", {})
            if config and not config.get("spatial_upsample", False):
                raise FlagError(
                    f"--spatial-upsampler-path {str(upsampler)!r} is a temporal-only upsampler; pass a spatial one"
                )
        loras = tuple(self._lora_file("--lora", lora) for lora in choice.loras)
        distilled = choice.distilled_lora
        if distilled is not None:
            distilled = self._lora_file("--distilled-lora", distilled)
        return RunModels(
            checkpoint=checkpoint,
            gemma_root=gemma_root,
            spatial_upsampler=upsampler,
            loras=loras,
            distilled_lora=distilled,
            lora_fusion=choice.lora_fusion,
            metadata=metadata,
            choice=choice,
            demo=demo,
        )

    def _resolve(self, flag: str, value: str | Path, *, folder: bool = False) -> Path:
        try:
            return resolve_model_path(value, folder=folder, cache_dir=self.hf_cache_dir, offline=self.hf_offline)
        except HfPathError as e:
            raise FlagError(f"{flag}: {e}") from None

    def _lora_file(self, flag: str, lora: LoraSpec) -> LoraSpec:
        path = self._resolve(flag, lora.path)
        self._kind(flag, path, "lora")
        return LoraSpec(path, lora.strength)

    def _kind(self, flag: str, path: Path, expected: ExpectedKind) -> dict[str, Any]:
        if not self.check_kinds:
            return {}
        try:
            return check_checkpoint_kind(path, expected).header.metadata
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None

    def record(self, value: ModelChoice) -> dict[str, Any]:
        recorded: dict[str, Any] = {self.checkpoint_dest: value.checkpoint}
        if self.loras:
            recorded["lora"] = [{"path": str(lora.path), "strength": lora.strength} for lora in value.loras]
            recorded["lora_fusion_precision"] = value.lora_fusion.value
        if self.gemma:
            recorded["gemma_root"] = value.gemma_root
        if self.two_stage:
            recorded["spatial_upsampler_path"] = value.spatial_upsampler
        if self.distilled_lora:
            lora = value.distilled_lora
            recorded["distilled_lora"] = None if lora is None else {"path": str(lora.path), "strength": lora.strength}
        return recorded

    def real_weights_help(self) -> str:
        """What to download (the released file names) and pass instead of the demo's random weights."""
        if self.distilled:
            files, flags = ["ltx-2.3-22b-distilled-1.1.safetensors"], ["--distilled-checkpoint-path"]
        else:
            files, flags = ["ltx-2.3-22b-dev.safetensors"], ["--checkpoint-path"]
        if self.two_stage:
            files.append("ltx-2.3-spatial-upscaler-x2-1.1.safetensors")
            flags.append("--spatial-upsampler-path")
        if self.distilled_lora:
            files.append("ltx-2.3-22b-distilled-lora-384-1.1.safetensors")
            flags.append("--distilled-lora")
        flags.append("--gemma-root")
        names = " \\\n      ".join(files)
        return (
            "Demo weights are random: the output is noise. For real videos, download the released files, e.g.\n"
            f"  hf download Lightricks/LTX-2.3 {names} --local-dir models/ltx-2.3\n"
            "  hf download google/gemma-3-12b-it-qat-q4_0-unquantized --local-dir models/gemma-3-12b\n"
            f"and pass them with {', '.join(flags[:-1])} and {flags[-1]}\n"
            "(hf://<org>/<repo>/<file> paths work too)."
        )


def _local_file(flag: str, value: str | Path) -> None:
    """Existence of a local (non-hf://) file; hf:// paths are checked when resolved."""
    if is_hf_path(value):
        return
    path = Path(value).expanduser()
    if not path.exists():
        raise FlagError(f"{flag} {str(value)!r}: no such file")
    if not path.is_file():
        raise FlagError(f"{flag} {str(value)!r} is not a file")


def _gemma_folder(flag: str, root: Path) -> Path:
    """The Gemma folder checked by ltx_core's `locate_gemma_folder` (the loader's own check)."""
    try:
        return locate_gemma_folder(root).root
    except CheckpointError as e:
        raise FlagError(f"{flag}: {e}") from None
