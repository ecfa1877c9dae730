"""The model-files flag group: the LTX checkpoint - one single file (`--checkpoint-path` or
`--distilled-checkpoint-path`, with `--gemma-root`) or one file per component (`--transformer-path`,
`--text-encoder-path`, `--video-vae-path`, `--audio-vae-path`, `--duration-head-path`: the LTX-2.5 release) -,
the two-stage files (`--spatial-upsampler-path`, `--distilled-lora`), the LoRAs (`--lora`,
`--lora-fusion-precision`) and which demo set `--demo` uses (`--demo-family`).

Reading it checks what needs no download (required flags, local files exist, the Gemma folder);
`cli.model_resolution` then fetches hf:// paths and reads each file's header to check it is the kind its flag
expects, and `demo.assets` puts the demo's files where `--demo` runs without the user's.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_core.loader.components import COMPONENT_FLAGS, Component
from ltx_core.loader.lora_spec import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec
from ltx_pipelines.cli.arg_types import LoraAction
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading, finite
from ltx_pipelines.cli.model_resolution import check_gemma_folder
from ltx_pipelines.engine.model_versions import (
    DEFAULT_DEMO_FAMILY,
    DEFAULT_LORA_STRENGTH,
    DEMO_FAMILIES,
    DEMO_LTX25_MODEL_VERSION,
    LTX_2_3_DEFAULTS,
    RELEASED_MODEL_VERSIONS,
    PipelineDefaults,
    defaults_for_checkpoint,
    defaults_for_version,
    normalize_model_version,
)

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


def lora_flag(flag: str, *, help: str, default: list[Any] | None) -> Flag:
    """A `PATH [STRENGTH]` LoRA flag (`LoraAction`): each use appends a `LoraSpec`; `default` is what it parses
    to when absent ([] for a repeatable list, None where absence itself means something)."""
    return Flag(
        flag, {"action": LoraAction, "nargs": "+", "metavar": ("PATH", "STRENGTH"), "default": default, "help": help}
    )


def add_lora_flag(group: argparse._ArgumentGroup, flag: str, *, help: str, default: list[Any] | None) -> None:
    """`lora_flag` added to `group` (a group that adds its flags itself)."""
    row = lora_flag(flag, help=help, default=default)
    group.add_argument(row.name, **row.options)


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
    # Derived once from the fields above (read by parsing, reading and resolution alike).
    default_demo_family: str = field(init=False)
    """The demo set `--demo` uses without `--demo-family`: the general default where this pipeline runs it,
    else the first family it runs on (a pipeline that runs on one family only defaults to it)."""
    checkpoint_flag: str = field(init=False)
    checkpoint_dest: str = field(init=False)
    needed_components: tuple[Component, ...] = field(init=False)
    """What this pipeline needs from a set of component files (the duration head is optional)."""
    sections: tuple[FlagSection, ...] = field(init=False, repr=False, compare=False)

    @classmethod
    def distilled_two_stage(cls, **options: Any) -> ModelFlags:
        """The model files of the distilled two-stage family (distilled, IC-LoRA, lip-dub, DFR, HDR): a distilled
        checkpoint and the spatial upsampler between its stages; `options`: the other fields."""
        return cls(distilled=True, two_stage=True, **options)

    def __post_init__(self) -> None:
        flag = "--distilled-checkpoint-path" if self.distilled else "--checkpoint-path"
        needed = [Component.TRANSFORMER]
        needed += [Component.TEXT_ENCODER] if self.gemma else []
        needed += [Component.VIDEO_VAE] if self.video else []
        derived = {
            "default_demo_family": (
                DEFAULT_DEMO_FAMILY if DEFAULT_DEMO_FAMILY in self.demo_families else self.demo_families[0]
            ),
            "checkpoint_flag": flag,
            "checkpoint_dest": flag.lstrip("-").replace("-", "_"),
            "needed_components": (*needed, Component.AUDIO_VAE),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "sections", self._sections())

    def _sections(self) -> tuple[FlagSection, ...]:
        kind = "distilled single-file checkpoint" if self.distilled else "single-file checkpoint"
        files = [
            Flag(
                self.checkpoint_flag,
                {
                    "type": str,
                    "default": None,
                    "help": f"The LTX-2 {kind} (.safetensors) or a diffusers model folder, a path or "
                    "hf://<org>/<repo>[/<file>].",
                },
            )
        ]
        if self.gemma:
            files.append(
                Flag(
                    "--gemma-root",
                    {
                        "type": str,
                        "default": None,
                        "help": "The Gemma 3 text encoder folder (Hugging Face layout) or a GGUF Gemma 3 file "
                        "(llama.cpp's layout, e.g. gemma-3-12b-it-Q8_0.gguf), a path or hf://<org>/<repo>.",
                    },
                )
            )
        if self.two_stage:
            files.append(
                Flag(
                    "--spatial-upsampler-path",
                    {
                        "type": str,
                        "default": None,
                        "help": "The latent x2 spatial upsampler between the stages (.safetensors, or a diffusers "
                        "latent_upsampler/ folder), a path or hf:// file.",
                    },
                )
            )
        if self.distilled_lora:
            distilled_help = self.distilled_lora_help or (
                "The distilled LoRA fused for the second (refinement) stage, with an optional strength "
                f"(default {DEFAULT_LORA_STRENGTH}). Example: --distilled-lora distilled-lora.safetensors 0.8"
            )
            files.append(lora_flag("--distilled-lora", default=None, help=distilled_help))
        sections = [FlagSection("model files", (*files, *self._component_flags(), *self._demo_flags()))]
        if self.loras:
            sections.append(self._lora_flags())
        return tuple(sections)

    def _demo_flags(self) -> tuple[Flag, Flag]:
        return (
            Flag(
                "--demo",
                {
                    "action": "store_true",
                    "help": "Run the pipeline's small demo configuration (tiny random models, noise as output); "
                    "model paths become optional. With --help: shows the demo's defaults.",
                },
            ),
            Flag(
                "--demo-family",
                {
                    "choices": DEMO_FAMILIES,
                    "default": None,
                    "help": f"With --demo: the model family of the demo files (default: {self.default_demo_family}; "
                    f"this pipeline runs on: {', '.join(self.demo_families)}).",
                },
            ),
        )

    def _component_flags(self) -> list[Flag]:
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
        return [
            Flag(
                flag,
                {
                    "type": str,
                    "default": None,
                    "help": f"Component files, instead of {self.checkpoint_flag}: {what[component]}; "
                    "a path or hf://<org>/<repo>/<file>.",
                },
            )
            for component, flag in COMPONENT_FLAGS.items()
        ]

    def _lora_flags(self) -> FlagSection:
        lora_help = self.lora_help or (
            f"A LoRA to fuse into the transformer, with an optional strength (default {DEFAULT_LORA_STRENGTH}); "
            "repeatable. Example: --lora style.safetensors 0.8 --lora hf://org/repo/other.safetensors"
        )
        fusion = Flag(
            "--lora-fusion-precision",
            {
                "choices": [p.value for p in LoraFusionPrecision],
                "default": DEFAULT_LORA_FUSION.value,
                "help": (
                    "How LoRA updates are fused into the weights. weight-dtype: rounded in the dtype the checkpoint "
                    "stores them in (bfloat16), as the reference implementation does - its outputs are reproduced. "
                    "float32: accumulated in float32 without those roundings (slightly different results). "
                    f"(default: {DEFAULT_LORA_FUSION.value})"
                ),
            },
        )
        return FlagSection("LoRAs", (lora_flag("--lora", default=[], help=lora_help), fusion))

    # ---- reading -----------------------------------------------------------------------------------

    def model_version_defaults(self, args: argparse.Namespace) -> PipelineDefaults:
        """The defaults of the model version the checkpoint declares (read from a local or already cached
        file's header only; none given or unreadable: LTX-2.3's)."""
        from ltx_pipelines.cli.model_resolution import cached_hf_file, is_hf_path

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

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[ModelChoice]:
        from ltx_core.loader.model_files import names_a_model_folder
        from ltx_pipelines.cli.model_resolution import is_hf_path

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
                    check_gemma_folder(flag, Path(value).expanduser())
            elif names_a_model_folder(value):
                continue  # a diffusers folder (checkpoint, or its latent_upsampler/): checked on resolve
            else:
                _local_file(flag, value)
        # What the sidecar records of these flags is the files as the run used them (`RunModels.parameters`).
        return Reading(ModelChoice(
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
        ))  # fmt: skip

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

    def _split_required(self, components: dict[Component, str], demo: bool) -> list[tuple[str, str | None]]:
        """Component files: every needed one given (with --demo the demo set fills the rest); each is then
        checked like the single file."""

        missing = [COMPONENT_FLAGS[c] for c in self.needed_components if c not in components]
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


def _local_file(flag: str, value: str | Path) -> None:
    """Existence of a local (non-hf://) file; hf:// paths are checked when resolved."""
    from ltx_pipelines.cli.model_resolution import is_hf_path

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
    from ltx_pipelines.cli.model_resolution import is_hf_path

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
