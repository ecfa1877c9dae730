"""The model-files flag group: the LTX checkpoint - one single file (`--checkpoint-path` or
`--distilled-checkpoint-path`, with `--gemma-root`) or one file per component (`--transformer-path`,
`--text-encoder-path`, `--video-vae-path`, `--audio-vae-path`, `--duration-head-path`: the LTX-2.5 release) -,
the two-stage files (`--spatial-upsampler-path`, `--distilled-lora`), the LoRAs (`--lora`,
`--lora-fusion-precision`) and which demo set `--demo` uses (`--demo-family`).

Reading it checks what needs no download (required flags, local files exist, the Gemma folder); `resolve`
then fetches hf:// paths and reads each file's header to check it is the kind its flag expects.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_core.loader.components import COMPONENT_FLAGS, Component
from ltx_core.loader.lora_spec import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec
from ltx_pipelines.cli.arg_types import LoraAction
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext, finite
from ltx_pipelines.engine.defaults import (
    DEFAULT_DEMO_FAMILY,
    DEFAULT_LORA_STRENGTH,
    DEMO_FAMILIES,
    DEMO_LTX25_MODEL_VERSION,
    LTX_2_3_DEFAULTS,
    PipelineDefaults,
    defaults_for_checkpoint,
    defaults_for_version,
    normalize_model_version,
)
from ltx_pipelines.engine.model_versions import RELEASED_MODEL_VERSIONS, model_version_problem

if TYPE_CHECKING:
    from ltx_core.loader.model_files import ModelFiles
    from ltx_pipelines.engine.checkpoint_kind import ExpectedKind

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
    transformer: str | None = None
    text_encoder: str | None = None
    video_vae: str | None = None
    audio_vae: str | None = None
    duration_head: str | None = None
    demo_family: str | None = None
    """The demo set `--demo` uses (None without `--demo`)."""

    def components(self) -> dict[Component, str]:
        """The component files given (`--transformer-path`, ...), by component."""

        given = {
            Component.TRANSFORMER: self.transformer,
            Component.TEXT_ENCODER: self.text_encoder,
            Component.VIDEO_VAE: self.video_vae,
            Component.AUDIO_VAE: self.audio_vae,
            Component.DURATION_HEAD: self.duration_head,
        }
        return {component: value for component, value in given.items() if value is not None}

    @property
    def split(self) -> bool:
        """Whether the model is given one file per component (`--video-vae-path` alone also fits a single file)."""

        return any(c is not Component.VIDEO_VAE for c in self.components())


@dataclass(frozen=True)
class RunModels:
    """The model files of a run, local and checked, with what their headers say. `checkpoint` is what the
    pipelines take as their model: the single file, or the set of component files (`ModelFiles`)."""

    checkpoint: Path | ModelFiles
    gemma_root: Path | None
    spatial_upsampler: Path | None = None
    loras: tuple[LoraSpec, ...] = ()
    distilled_lora: LoraSpec | None = None
    lora_fusion: LoraFusionPrecision = DEFAULT_LORA_FUSION
    metadata: dict[str, Any] = field(default_factory=dict)
    """The checkpoint's safetensors metadata (component files: the transformer's, with the `config` sections
    of the whole set); empty when kinds were not checked."""
    choice: ModelChoice | None = None
    """The files as named on the command line (recorded in the sidecar)."""
    demo: bool = False
    """Whether `--demo` substituted any of them."""

    @property
    def model_version(self) -> tuple[int, ...]:
        return normalize_model_version(self.metadata.get("model_version"))

    @property
    def demo_family(self) -> str:
        """The demo set `--demo` substituted (the default family when none was)."""
        family = self.choice.demo_family if self.choice is not None else None
        return family or DEFAULT_DEMO_FAMILY

    @property
    def transformer_config(self) -> dict[str, Any]:
        return (self.metadata.get("config") or {}).get("transformer") or {}

    @property
    def num_layers(self) -> int | None:
        layers = self.transformer_config.get("num_layers")
        return int(layers) if isinstance(layers, int) else None

    def files(self) -> dict[str, Path]:
        """The model files by role, for the sidecar (a pipeline without an upsampler lists none; component
        files by component: transformer, text_encoder, video_vae, ...)."""
        from ltx_core.loader.model_files import ModelFiles

        given: dict[str, Path | None] = {}
        if isinstance(self.checkpoint, ModelFiles):
            for source in self.checkpoint.sources:
                if source.component is not None and source.component is not Component.TEXT_EMBEDDINGS:
                    given[source.component.value] = source.path
        else:
            given["checkpoint"] = self.checkpoint
        given.update(spatial_upsampler=self.spatial_upsampler, gemma_root=self.gemma_root)
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
    distilled_lora_required: bool = True
    """Whether `--distilled-lora` must be given (without --demo); False where a distilled checkpoint runs alone."""
    distilled_lora_help: str | None = None
    """What `--distilled-lora` does where a pipeline fuses it elsewhere than the refinement stage (e.g. DFR)."""
    gemma: bool = True
    loras: bool = True
    """`--lora` and `--lora-fusion-precision`."""
    hf_cache_dir: str | Path | None = None
    hf_offline: bool | None = None
    check_kinds: bool = True
    """False skips reading the model headers (tests of the other rules)."""
    lora_help: str | None = None
    """What `--lora` means where a pipeline narrows it (e.g. IC-LoRAs, fused into stage 1 only)."""
    video: bool = True
    """Whether the pipeline needs a video VAE (component files without `--video-vae-path` are refused)."""
    demo_families: tuple[str, ...] = DEMO_FAMILIES
    """The demo sets `--demo-family` may pick for this pipeline (others are refused before anything is built)."""
    model_versions: tuple[str, ...] = RELEASED_MODEL_VERSIONS
    """The released model versions this pipeline runs on ("2", "2.3", "2.5"); a checkpoint whose `model_version`
    is another is refused when its header is read. README's pipeline table is checked against this value."""
    demo_ic_lora: str | None = None
    """The LTX-2.5 demo set's IC-LoRA (an `Ltx25DemoAssets` field, e.g. `dubit_ic_lora`) that `--demo` passes as
    `--lora` when none is given; None: the demo runs without one."""

    @property
    def default_demo_family(self) -> str:
        """The demo set `--demo` uses without `--demo-family`: the general default where this pipeline runs it,
        else the first family it runs on (a pipeline that runs on one family only defaults to it)."""
        return DEFAULT_DEMO_FAMILY if DEFAULT_DEMO_FAMILY in self.demo_families else self.demo_families[0]

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
                help="The Gemma 3 text encoder folder (Hugging Face layout) or a GGUF Gemma 3 file (llama.cpp's "
                "layout, e.g. gemma-3-12b-it-Q8_0.gguf), a path or hf://<org>/<repo>.",
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
                help=self.distilled_lora_help
                or (
                    "The distilled LoRA fused for the second (refinement) stage, with an optional strength "
                    f"(default {DEFAULT_LORA_STRENGTH}). Example: --distilled-lora distilled-lora.safetensors 0.8"
                ),
            )
        self._add_component_flags(group)
        group.add_argument(
            "--demo",
            action="store_true",
            help="Run the pipeline's small demo configuration (tiny random models, noise as output); model paths "
            "become optional. With --help: shows the demo's defaults.",
        )
        group.add_argument(
            "--demo-family",
            choices=DEMO_FAMILIES,
            default=None,
            help=f"With --demo: the model family of the demo files (default: {self.default_demo_family}; "
            f"this pipeline runs on: {', '.join(self.demo_families)}).",
        )
        if self.loras:
            self._add_lora_flags(parser)

    def _add_component_flags(self, group: argparse._ArgumentGroup) -> None:
        """The one-file-per-component flags (LTX-2.5's release), instead of the single file."""

        what = {
            Component.TRANSFORMER: "the transformer file (e.g. ltx-2.5-22b-distilled-transformer-bf16.safetensors)",
            Component.TEXT_ENCODER: "the packed text encoder file (e.g. gemma4-12b-with-proj-ltx-2.5-bf16.safetensors) "
            "or a Gemma folder; replaces --gemma-root",
            Component.VIDEO_VAE: "the video VAE file (diffusion or convolutional decoder); with a single-file "
            "checkpoint it replaces the checkpoint's video VAE",
            Component.AUDIO_VAE: "the audio VAE + vocoder file",
            Component.DURATION_HEAD: "the duration head file (optional; pipelines with --auto-duration let it pick "
            "the length from the prompt)",
        }
        for component, flag in COMPONENT_FLAGS.items():
            group.add_argument(
                flag,
                type=str,
                default=None,
                help=f"Component files, instead of {self.checkpoint_flag}: {what[component]}; "
                "a path or hf://<org>/<repo>/<file>.",
            )

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

    def model_version_defaults(self, args: argparse.Namespace) -> PipelineDefaults:
        """The defaults of the model generation the checkpoint declares (read from a local or already cached
        file's header only; none given or unreadable: LTX-2.3's)."""
        from ltx_pipelines.cli.hf_paths import cached_hf_file, is_hf_path

        value = getattr(args, self.checkpoint_dest) or getattr(args, "transformer_path", None)
        if value is None:
            family = getattr(args, "demo_family", None) or self.default_demo_family
            if getattr(args, "demo", False) and family == "ltx-2.5":
                return defaults_for_version(normalize_model_version(DEMO_LTX25_MODEL_VERSION))
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
        from ltx_core.loader.model_files import names_a_model_folder
        from ltx_pipelines.cli.hf_paths import is_hf_path

        loras, distilled_lora = self._read_loras(args, context)
        checkpoint = getattr(args, self.checkpoint_dest)
        gemma_root = args.gemma_root if self.gemma else None
        components = self._read_components(args)
        family = self._demo_family(args, context, checkpoint, gemma_root, components)
        split = any(c is not Component.VIDEO_VAE for c in components)
        required: list[tuple[str, str | None]] = []
        if split:
            required += self._split_required(components, context.demo)
        else:
            required.append((self.checkpoint_flag, checkpoint))
            # A diffusers folder's text_encoder/ is not read (docs/interop.md): the Gemma folder is always named.
            if self.gemma:
                required.append(("--gemma-root", gemma_root))
            if Component.VIDEO_VAE in components:
                _local_file(COMPONENT_FLAGS[Component.VIDEO_VAE], components[Component.VIDEO_VAE])
        spatial_upsampler = args.spatial_upsampler_path if self.two_stage else None
        if self.two_stage and spatial_upsampler is None and not split and checkpoint is not None:
            spatial_upsampler = _folder_upsampler(checkpoint)
        if self.two_stage:
            required.append(("--spatial-upsampler-path", spatial_upsampler))
        text_encoder_flag = COMPONENT_FLAGS[Component.TEXT_ENCODER]
        for flag, value in required:
            if value is None:
                if not context.demo:
                    raise FlagError(f"{flag} is required (a local path or hf://<org>/<repo>/<file>), or pass --demo")
            elif flag == "--gemma-root" or (flag == text_encoder_flag and names_a_model_folder(value)):
                if not is_hf_path(value):
                    _gemma_folder(flag, Path(value).expanduser())
            elif names_a_model_folder(value):
                continue  # a diffusers folder (checkpoint, or its latent_upsampler/): checked on resolve
            else:
                _local_file(flag, value)
        return ModelChoice(
            checkpoint=checkpoint,
            gemma_root=gemma_root,
            spatial_upsampler=spatial_upsampler,
            loras=loras,
            distilled_lora=distilled_lora,
            lora_fusion=LoraFusionPrecision.parse(args.lora_fusion_precision) if self.loras else DEFAULT_LORA_FUSION,
            transformer=components.get(Component.TRANSFORMER),
            text_encoder=components.get(Component.TEXT_ENCODER),
            video_vae=components.get(Component.VIDEO_VAE),
            audio_vae=components.get(Component.AUDIO_VAE),
            duration_head=components.get(Component.DURATION_HEAD),
            demo_family=family,
        )

    def _read_loras(
        self, args: argparse.Namespace, context: ReadContext
    ) -> tuple[tuple[LoraSpec, ...], LoraSpec | None]:
        """`--lora` and `--distilled-lora`, each file checked to be a LoRA."""
        loras = tuple(args.lora or []) if self.loras else ()
        for lora in loras:
            self._check_lora("--lora", lora)
        if not self.distilled_lora:
            return loras, None
        given = args.distilled_lora or []
        if len(given) > 1:
            raise FlagError(f"--distilled-lora was given {len(given)} times; pass it once")
        distilled_lora = given[0] if given else None
        if distilled_lora is not None:
            self._check_lora("--distilled-lora", distilled_lora)
        elif self.distilled_lora_required and not context.demo:
            raise FlagError("--distilled-lora PATH [STRENGTH] is required by this pipeline (or pass --demo)")
        return loras, distilled_lora

    def _read_components(self, args: argparse.Namespace) -> dict[Component, str]:
        """The component flags given; a mix with the single file (or --gemma-root) is refused, naming both."""

        components = {
            component: getattr(args, flag.lstrip("-").replace("-", "_")) for component, flag in COMPONENT_FLAGS.items()
        }
        components = {c: v for c, v in components.items() if v is not None}
        split_flags = [COMPONENT_FLAGS[c] for c in components if c is not Component.VIDEO_VAE]
        single = [(self.checkpoint_flag, getattr(args, self.checkpoint_dest))]
        if self.gemma:
            single.append(("--gemma-root", args.gemma_root))
        single_flags = [flag for flag, value in single if value is not None]
        if split_flags and single_flags:
            raise FlagError(
                f"{' and '.join(single_flags)} (single-file checkpoint) cannot be combined with "
                f"{', '.join(split_flags)} (one file per component): give either {self.checkpoint_flag}"
                f"{' + --gemma-root' if self.gemma else ''} or the component files "
                f"({COMPONENT_FLAGS[Component.VIDEO_VAE]} fits both)"
            )
        return components

    def needed_components(self) -> tuple[Component, ...]:
        """What this pipeline needs from a set of component files (the duration head is optional)."""

        needed = [Component.TRANSFORMER]
        if self.gemma:
            needed.append(Component.TEXT_ENCODER)
        if self.video:
            needed.append(Component.VIDEO_VAE)
        needed.append(Component.AUDIO_VAE)
        return tuple(needed)

    def _split_required(self, components: dict[Component, str], demo: bool) -> list[tuple[str, str | None]]:
        """Component files: every needed one given (with --demo the demo set fills the rest); each is then
        checked like the single file."""

        missing = [COMPONENT_FLAGS[c] for c in self.needed_components() if c not in components]
        if missing and not demo:
            given = ", ".join(COMPONENT_FLAGS[c] for c in components)
            raise FlagError(
                f"component files were given ({given}) but this pipeline also needs {', '.join(missing)}; "
                f"give every component file, or the single file ({self.checkpoint_flag})"
            )
        return [(COMPONENT_FLAGS[c], v) for c, v in components.items()]

    def _demo_family(
        self,
        args: argparse.Namespace,
        context: ReadContext,
        checkpoint: str | None,
        gemma_root: str | None,
        components: dict[Component, str],
    ) -> str | None:
        """The demo family `--demo-family` picks, checked against the pipeline and the files given."""

        family = args.demo_family or self.default_demo_family
        if not context.demo:
            if args.demo_family is not None:
                raise FlagError(f"--demo-family {family} is only used with --demo")
            return None
        if family not in self.demo_families:
            raise FlagError(
                f"--demo-family {family}: this pipeline runs its demo on {', '.join(self.demo_families)} only "
                "(lipdub and hdr_ic_lora are the LTX-2.3 pipelines; on LTX-2.5 use python -m ltx_pipelines.dubit)"
            )
        split = any(c is not Component.VIDEO_VAE for c in components)
        if family == "ltx-2.5" and (checkpoint is not None or gemma_root is not None):
            given = self.checkpoint_flag if checkpoint is not None else "--gemma-root"
            raise FlagError(f"--demo-family ltx-2.5 is a set of component files; {given} names a single-file model")
        if family != "ltx-2.5" and split:
            raise FlagError(
                f"--demo-family {family} is a single-file model; component files need --demo-family ltx-2.5"
            )
        return family

    def _check_lora(self, flag: str, lora: LoraSpec) -> None:
        finite(f"{flag} {str(lora.path)!r} STRENGTH", lora.strength)
        _local_file(flag, lora.path)

    def with_demo_files(self, choice: ModelChoice) -> ModelChoice:
        """`choice` with the demo model files wherever the user gave none (built on first use)."""
        from ltx_pipelines.demo import ensure_demo_assets

        # One line here; how to get the released files is said once, with the output (`write_decoded`).
        logger.warning("--demo: the models are tiny and random, so the output is noise")
        if choice.demo_family == "ltx-2.5":
            return self._with_ltx25_demo_files(choice)
        assets = ensure_demo_assets()
        # Pipelines with a distilled LoRA run the demo's stage 2 without one.
        return replace(
            choice,
            checkpoint=choice.checkpoint or str(assets.checkpoint),
            gemma_root=(choice.gemma_root or str(assets.gemma_root)) if self.gemma else None,
            spatial_upsampler=(choice.spatial_upsampler or str(assets.spatial_upsampler)) if self.two_stage else None,
        )

    def _with_ltx25_demo_files(self, choice: ModelChoice) -> ModelChoice:
        """`choice` with the LTX-2.5 demo's component files wherever the user gave none."""
        from ltx_pipelines.demo import ensure_demo_assets

        assets = ensure_demo_assets(family="ltx-2.5")
        loras = choice.loras
        if not loras and self.demo_ic_lora is not None:
            loras = (LoraSpec(getattr(assets, self.demo_ic_lora)),)
        return replace(
            choice,
            loras=loras,
            transformer=choice.transformer or str(assets.transformer),
            text_encoder=(choice.text_encoder or str(assets.text_encoder)) if self.gemma else choice.text_encoder,
            video_vae=(choice.video_vae or str(assets.video_vae)) if self.video else choice.video_vae,
            audio_vae=choice.audio_vae or str(assets.audio_vae),
            duration_head=choice.duration_head or str(assets.duration_head),
            spatial_upsampler=(choice.spatial_upsampler or str(assets.spatial_upsampler)) if self.two_stage else None,
        )

    def resolve(self, choice: ModelChoice, *, demo: bool = False) -> RunModels:
        """Local copies of hf:// paths (may download) and each file checked to be the kind its flag expects."""
        from ltx_core.loader.model_files import names_a_model_folder
        from ltx_pipelines.cli.hf_paths import is_hf_path

        if choice.split:
            checkpoint, metadata = self._resolve_components(choice)
        else:
            checkpoint, metadata = self._resolve_single_file(choice)
        self._check_configs(checkpoint, single_file_flag=None if choice.split else self.checkpoint_flag)
        if self.check_kinds:
            problem = model_version_problem(normalize_model_version(metadata.get("model_version")), self.model_versions)
            if problem is not None:
                flag = COMPONENT_FLAGS[Component.TRANSFORMER] if choice.split else self.checkpoint_flag
                raise FlagError(f"{flag} {str(checkpoint)!r}: {problem}")
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
        shapes = self._transformer_shapes(checkpoint) if choice.loras or choice.distilled_lora else {}
        loras = tuple(self._lora_file("--lora", lora, shapes) for lora in choice.loras)
        distilled = choice.distilled_lora
        if distilled is not None:
            distilled = self._lora_file("--distilled-lora", distilled, shapes)
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

    def _resolve_single_file(self, choice: ModelChoice) -> tuple[Path | ModelFiles, dict[str, Any]]:
        from ltx_core.loader import CheckpointError, read_safetensors_header
        from ltx_core.loader.model_files import (
            COMPONENT_FLAGS,
            Component,
            ModelFiles,
            model_files_of,
            names_a_model_folder,
        )

        assert choice.checkpoint is not None, "read() requires the checkpoint unless --demo substituted one"
        checkpoint = self._resolve(
            self.checkpoint_flag, choice.checkpoint, folder=names_a_model_folder(choice.checkpoint)
        )
        metadata = self._kind(self.checkpoint_flag, checkpoint, "ltx_checkpoint")
        if choice.video_vae is None:
            if self.check_kinds:
                self._check_components(model_files_of(checkpoint), single=True)
            return checkpoint, metadata
        # The single file with another video VAE (e.g. LTX-2.5's diffusion decoder): a set of model files.
        flag = COMPONENT_FLAGS[Component.VIDEO_VAE]
        vae = self._resolve(flag, choice.video_vae)
        self._component_kind(flag, vae)
        try:
            files = ModelFiles.single_file(checkpoint, video_vae=vae)
        except CheckpointError as e:
            raise FlagError(str(e)) from None
        if self.check_kinds:
            self._check_components(files, single=True)
        if not metadata:
            return files, metadata
        vae_config = (read_safetensors_header(vae).metadata.get("config") or {}).get("vae")
        config = dict(metadata.get("config") or {})
        if vae_config is not None:
            config["vae"] = vae_config
        return files, {**metadata, "config": config}

    def _resolve_components(self, choice: ModelChoice) -> tuple[ModelFiles, dict[str, Any]]:
        """The component files, local and checked: the transformer is an LTX transformer file, the set has what
        the pipeline needs, and the text encoder is the one the transformer was trained with (both named)."""
        from ltx_core.loader import CheckpointError
        from ltx_core.loader.model_files import ModelFiles, names_a_model_folder
        from ltx_pipelines.cli.hf_paths import is_hf_path

        paths: dict[str, Path] = {}
        for component, value in choice.components().items():
            flag = COMPONENT_FLAGS[component]
            folder = component is Component.TEXT_ENCODER and names_a_model_folder(value)
            path = self._resolve(flag, value, folder=folder)
            if folder and is_hf_path(value):
                _gemma_folder(flag, path)
            paths[component.value] = path
        transformer_flag = COMPONENT_FLAGS[Component.TRANSFORMER]
        metadata = self._kind(transformer_flag, paths[Component.TRANSFORMER.value], "ltx_checkpoint")
        for component in (Component.VIDEO_VAE, Component.AUDIO_VAE, Component.DURATION_HEAD):
            if component.value in paths:
                self._component_kind(COMPONENT_FLAGS[component], paths[component.value])
        try:
            files = ModelFiles.split(**paths)
        except CheckpointError as e:
            raise FlagError(str(e)) from None
        if self.check_kinds:
            self._check_components(files, single=False)
        else:
            try:
                files.require(*self.needed_components(), purpose="this pipeline")
            except CheckpointError as e:
                raise FlagError(str(e)) from None
        if metadata:
            metadata = {**metadata, "config": files.config()}
        return files, metadata

    def _check_configs(self, checkpoint: Path | ModelFiles, *, single_file_flag: str | None) -> None:
        """A diffusers folder's translated configs describe buildable models (meta-device builds, no weight
        read). Released files carry the configs their weights were saved with and are checked when loaded."""
        from ltx_core.loader import CheckpointError
        from ltx_core.loader.model_files import Layout, ModelFiles, names_a_model_folder
        from ltx_pipelines.engine.model_loading import check_model_configs

        if isinstance(checkpoint, ModelFiles):
            diffusers = checkpoint.layout is Layout.DIFFUSERS
        else:
            diffusers = names_a_model_folder(checkpoint)
        if not self.check_kinds or not diffusers:
            return
        try:
            check_model_configs(checkpoint, self.needed_components())
        except CheckpointError as e:
            # The message names the file (or a diffusers folder's config.json); the flag says which was given.
            raise FlagError(f"{single_file_flag}: {e}" if single_file_flag else str(e)) from None

    def _check_components(self, files: ModelFiles, *, single: bool) -> None:
        """Every component this pipeline builds is in `files`, each from a file that carries its config section
        (headers only); a single file or folder's text encoder is the Gemma folder, checked on its own."""
        from ltx_core.loader import CheckpointError

        needed = self.needed_components()
        if single:
            needed = tuple(c for c in needed if c is not Component.TEXT_ENCODER)
        try:
            files.check_components(*needed, purpose="this pipeline")
        except CheckpointError as e:
            raise FlagError(str(e)) from None

    def _component_kind(self, flag: str, path: Path) -> None:
        """A component file is not a LoRA, an upsampler or a whole checkpoint given to the wrong flag."""
        from ltx_core.loader import CheckpointError

        if not self.check_kinds:
            return
        from ltx_pipelines.engine.checkpoint_kind import detect_checkpoint_kind

        try:
            info = detect_checkpoint_kind(path)
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None
        if info.kind in ("lora", "upsampler", "gemma_text_encoder"):
            raise FlagError(f"{flag}: {str(path)!r} is {info.description}, not a model component file")

    def _resolve(self, flag: str, value: str | Path, *, folder: bool = False) -> Path:
        from ltx_pipelines.cli.hf_paths import HfPathError, resolve_model_path

        try:
            return resolve_model_path(value, folder=folder, cache_dir=self.hf_cache_dir, offline=self.hf_offline)
        except HfPathError as e:
            raise FlagError(f"{flag}: {e}") from None

    def _transformer_shapes(self, checkpoint: Path | ModelFiles) -> dict[str, tuple[int, ...]]:
        """The transformer's weight shapes from the model's headers (what LoRAs are checked against)."""
        from ltx_core.loader import CheckpointError

        if not self.check_kinds:
            return {}
        from ltx_core.loader.builder import header_weight_shapes
        from ltx_core.model.transformer.spec import AV_TRANSFORMER

        try:
            return header_weight_shapes(AV_TRANSFORMER, checkpoint)
        except CheckpointError as e:
            raise FlagError(f"{self.checkpoint_flag}: {e}") from None

    def _lora_file(self, flag: str, lora: LoraSpec, transformer_shapes: dict[str, tuple[int, ...]]) -> LoraSpec:
        """The LoRA file, local, checked to be a LoRA whose every key, target and shape fits the transformer
        (headers only: a LoRA fusion would fail only after the prompt encoder and the transformer are built)."""
        from ltx_core.loader import CheckpointError
        from ltx_core.loader.lora import check_lora_fits

        path = self._resolve(flag, lora.path)
        self._kind(flag, path, "lora")
        if self.check_kinds and transformer_shapes:
            try:
                check_lora_fits(path, transformer_shapes, "transformer")
            except CheckpointError as e:
                raise FlagError(f"{flag}: {e}") from None
        return LoraSpec(path, lora.strength)

    def _kind(self, flag: str, path: Path, expected: ExpectedKind) -> dict[str, Any]:
        from ltx_core.loader import CheckpointError
        from ltx_pipelines.engine.checkpoint_kind import check_checkpoint_kind

        if not self.check_kinds:
            return {}
        try:
            return check_checkpoint_kind(path, expected).header.metadata
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None

    def record(self, value: ModelChoice) -> dict[str, Any]:

        recorded: dict[str, Any] = {self.checkpoint_dest: value.checkpoint}
        for component, flag in COMPONENT_FLAGS.items():
            recorded[flag.lstrip("-").replace("-", "_")] = value.components().get(component)
        recorded["demo_family"] = value.demo_family
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

    def real_weights_help(self, family: str = DEFAULT_DEMO_FAMILY) -> str:
        """What to download (the released file names) and pass instead of the demo's random weights."""
        if family == "ltx-2.5":
            return ltx25_weights_help(distilled=self.distilled, two_stage=self.two_stage)
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
            f"  uv run hf download Lightricks/LTX-2.3 {names} --local-dir models/ltx-2.3\n"
            "  uv run hf download google/gemma-3-12b-it-qat-q4_0-unquantized --local-dir models/gemma-3-12b\n"
            f"and pass them with {', '.join(flags[:-1])} and {flags[-1]}\n"
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


def _local_file(flag: str, value: str | Path) -> None:
    """Existence of a local (non-hf://) file; hf:// paths are checked when resolved."""
    from ltx_pipelines.cli.hf_paths import is_hf_path

    if is_hf_path(value):
        return
    path = Path(value).expanduser()
    if not path.exists():
        raise FlagError(f"{flag} {str(value)!r}: no such file")
    if not path.is_file():
        raise FlagError(f"{flag} {str(value)!r} is not a file")


def _folder_upsampler(checkpoint: str) -> str | None:
    """A diffusers folder's x2 `latent_upsampler/`, the default `--spatial-upsampler-path` of a folder (its
    kind is checked when resolved like any other); None for a file or a local folder without one. A Hub
    folder is not listed here (no network while flags are read): its `latent_upsampler/` is fetched with it,
    and a repository without one is named when it is resolved."""
    from ltx_core.loader.diffusers_folder import UPSAMPLER_FOLDERS, is_diffusers_folder
    from ltx_core.loader.model_files import names_a_model_folder
    from ltx_pipelines.cli.hf_paths import is_hf_path

    if is_hf_path(checkpoint):
        if not names_a_model_folder(checkpoint):
            return None
        logger.info("--spatial-upsampler-path: the Hub folder's %s/", UPSAMPLER_FOLDERS[0])
        return f"{checkpoint.rstrip('/')}/{UPSAMPLER_FOLDERS[0]}"
    if not is_diffusers_folder(Path(checkpoint).expanduser()):
        return None
    upsampler = Path(checkpoint).expanduser() / UPSAMPLER_FOLDERS[0]
    if not upsampler.is_dir():
        return None
    logger.info("--spatial-upsampler-path: the model folder's %s/", UPSAMPLER_FOLDERS[0])
    return str(upsampler)


def _gemma_folder(flag: str, root: Path) -> Path:
    """The Gemma folder checked by ltx_core's `locate_gemma_folder` (the loader's own check). A file given to
    --gemma-root is most often LTX-2.5's packed text encoder: the error says which flags take those files."""
    from ltx_core.loader import CheckpointError
    from ltx_core.loader.gguf_file import is_gguf
    from ltx_core.text_encoders.gemma.folder import locate_gemma_folder
    from ltx_core.text_encoders.gemma.gguf_gemma import gguf_gemma_text_config

    if root.is_file() and is_gguf(root):
        # A GGUF Gemma 3 (llama.cpp's layout, issue 35): checked by ltx_core from its header.
        try:
            gguf_gemma_text_config(root)
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None
        return root
    if flag == "--gemma-root" and root.is_file():
        text_encoder = COMPONENT_FLAGS[Component.TEXT_ENCODER]
        others = ", ".join(
            COMPONENT_FLAGS[c] for c in (Component.TRANSFORMER, Component.VIDEO_VAE, Component.AUDIO_VAE)
        )
        raise FlagError(
            f"--gemma-root {str(root)!r} is a file, not a folder: it takes a Gemma 3 folder. A packed text encoder "
            f"file (LTX-2.5, e.g. gemma4-12b-with-proj-ltx-2.5-bf16.safetensors) goes in {text_encoder}, with the "
            f"other component files ({others}) instead of the single-file checkpoint"
        )
    try:
        return locate_gemma_folder(root).root
    except CheckpointError as e:
        raise FlagError(f"{flag}: {e}") from None
