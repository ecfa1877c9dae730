"""Model-file resolution: the files a command's model flags name (`ModelChoice`) made local and checked
(`resolve_models`): hf:// paths fetched, diffusers folders read, each file's header checked to be the kind its
flag expects (checkpoint, component, upsampler, LoRA), the model version one the pipeline runs on, LoRAs checked
to fit the transformer, the Gemma folder located. The result is the run's `RunModels`. Only headers and configs
are read here: no model is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_core.loader.components import COMPONENT_FLAGS, Component
from ltx_core.loader.lora_spec import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec
from ltx_pipelines.cli.flag_group import FlagError
from ltx_pipelines.engine.defaults import DEFAULT_DEMO_FAMILY, normalize_model_version
from ltx_pipelines.engine.model_versions import model_version_problem

if TYPE_CHECKING:
    from ltx_core.loader.file_headers import FileHeaders
    from ltx_core.loader.model_files import ModelFiles
    from ltx_pipelines.cli.model_flags import ModelChoice, ModelFlags
    from ltx_pipelines.engine.checkpoint_kind import ExpectedKind


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
    headers: FileHeaders | None = field(default=None, compare=False, repr=False)
    """The headers the checks read (a `FileHeaders` store): the pipeline's model files read through it, so no
    header is read twice in a run."""
    # What the headers say, read out once here (every group's settle and the memory check ask for them).
    model_version: tuple[int, ...] = field(init=False)
    demo_family: str = field(init=False)
    """The demo set `--demo` substituted (the default family when none was)."""
    transformer_config: dict[str, Any] = field(init=False)
    num_layers: int | None = field(init=False)

    def __post_init__(self) -> None:
        family = self.choice.demo_family if self.choice is not None else None
        transformer = (self.metadata.get("config") or {}).get("transformer") or {}
        layers = transformer.get("num_layers")
        derived = {
            "model_version": normalize_model_version(self.metadata.get("model_version")),
            "demo_family": family or DEFAULT_DEMO_FAMILY,
            "transformer_config": transformer,
            "num_layers": int(layers) if isinstance(layers, int) else None,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

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


def resolve_models(flags: ModelFlags, choice: ModelChoice, *, demo: bool = False) -> RunModels:
    """The run's model files: `choice` (as `flags` read it) made local and checked; `demo`: whether `--demo`
    substituted any of them. A file that is not what its flag takes is a `FlagError` naming the flag."""
    from ltx_core.loader.file_headers import FileHeaders

    return _Resolution(flags, FileHeaders()).resolve(choice, demo=demo)


@dataclass(frozen=True)
class _Resolution:
    """Resolution under the rules of one command's model flags (which flags, which kinds are checked, the hub
    cache and offline mode)."""

    flags: ModelFlags
    headers: FileHeaders
    """Every header the checks read, each once; handed on to the pipeline with the run's models."""

    def resolve(self, choice: ModelChoice, *, demo: bool = False) -> RunModels:
        """Local copies of hf:// paths (may download) and each file checked to be the kind its flag expects."""
        from ltx_core.loader.model_files import names_a_model_folder
        from ltx_pipelines.cli.hf_paths import is_hf_path

        split = choice.split
        if split:
            checkpoint, metadata = self._resolve_components(choice)
        else:
            checkpoint, metadata = self._resolve_single_file(choice)
        self._check_configs(checkpoint, single_file_flag=None if split else self.flags.checkpoint_flag)
        if self.flags.check_kinds:
            problem = model_version_problem(
                normalize_model_version(metadata.get("model_version")), self.flags.model_versions
            )
            if problem is not None:
                flag = COMPONENT_FLAGS[Component.TRANSFORMER] if split else self.flags.checkpoint_flag
                raise FlagError(f"{flag} {str(checkpoint)!r}: {problem}")
        gemma_root = None
        if choice.gemma_root is not None:
            gemma_root = self._resolve("--gemma-root", choice.gemma_root, folder=True)
            if is_hf_path(choice.gemma_root):
                check_gemma_folder("--gemma-root", gemma_root)
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
            headers=self.headers,
        )

    def _resolve_single_file(self, choice: ModelChoice) -> tuple[Path | ModelFiles, dict[str, Any]]:
        from ltx_core.loader import CheckpointError
        from ltx_core.loader.model_files import (
            COMPONENT_FLAGS,
            Component,
            ModelFiles,
            model_files_of,
            names_a_model_folder,
        )

        assert choice.checkpoint is not None, "read() requires the checkpoint unless --demo substituted one"
        checkpoint = self._resolve(
            self.flags.checkpoint_flag, choice.checkpoint, folder=names_a_model_folder(choice.checkpoint)
        )
        metadata = self._kind(self.flags.checkpoint_flag, checkpoint, "ltx_checkpoint")
        if choice.video_vae is None:
            if self.flags.check_kinds:
                self._check_components(model_files_of(checkpoint, headers=self.headers), single=True)
            return checkpoint, metadata
        # The single file with another video VAE (e.g. LTX-2.5's diffusion decoder): a set of model files.
        flag = COMPONENT_FLAGS[Component.VIDEO_VAE]
        vae = self._resolve(flag, choice.video_vae)
        self._component_kind(flag, vae)
        try:
            files = ModelFiles.single_file(checkpoint, video_vae=vae, headers=self.headers)
        except CheckpointError as e:
            raise FlagError(str(e)) from None
        if self.flags.check_kinds:
            self._check_components(files, single=True)
        if not metadata:
            return files, metadata
        vae_config = (self.headers.metadata(vae).get("config") or {}).get("vae")
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
                check_gemma_folder(flag, path)
            paths[component.value] = path
        transformer_flag = COMPONENT_FLAGS[Component.TRANSFORMER]
        metadata = self._kind(transformer_flag, paths[Component.TRANSFORMER.value], "ltx_checkpoint")
        for component in (Component.VIDEO_VAE, Component.AUDIO_VAE, Component.DURATION_HEAD):
            if component.value in paths:
                self._component_kind(COMPONENT_FLAGS[component], paths[component.value])
        try:
            files = ModelFiles.split(**paths, headers=self.headers)
        except CheckpointError as e:
            raise FlagError(str(e)) from None
        if self.flags.check_kinds:
            self._check_components(files, single=False)
        else:
            try:
                files.require(*self.flags.needed_components, purpose="this pipeline")
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
        if not self.flags.check_kinds or not diffusers:
            return
        try:
            check_model_configs(checkpoint, self.flags.needed_components)
        except CheckpointError as e:
            # The message names the file (or a diffusers folder's config.json); the flag says which was given.
            raise FlagError(f"{single_file_flag}: {e}" if single_file_flag else str(e)) from None

    def _check_components(self, files: ModelFiles, *, single: bool) -> None:
        """Every component this pipeline builds is in `files`, each from a file that carries its config section
        (headers only); a single file or folder's text encoder is the Gemma folder, checked on its own."""
        from ltx_core.loader import CheckpointError

        needed = self.flags.needed_components
        if single:
            needed = tuple(c for c in needed if c is not Component.TEXT_ENCODER)
        try:
            files.check_components(*needed, purpose="this pipeline")
        except CheckpointError as e:
            raise FlagError(str(e)) from None

    def _component_kind(self, flag: str, path: Path) -> None:
        """A component file is not a LoRA, an upsampler or a whole checkpoint given to the wrong flag."""
        from ltx_core.loader import CheckpointError

        if not self.flags.check_kinds:
            return
        from ltx_pipelines.engine.checkpoint_kind import detect_checkpoint_kind

        try:
            info = detect_checkpoint_kind(path, self.headers)
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None
        if info.kind in ("lora", "upsampler", "gemma_text_encoder"):
            raise FlagError(f"{flag}: {str(path)!r} is {info.description}, not a model component file")

    def _resolve(self, flag: str, value: str | Path, *, folder: bool = False) -> Path:
        from ltx_pipelines.cli.hf_paths import HfPathError, resolve_model_path

        try:
            return resolve_model_path(
                value, folder=folder, cache_dir=self.flags.hf_cache_dir, offline=self.flags.hf_offline
            )
        except HfPathError as e:
            raise FlagError(f"{flag}: {e}") from None

    def _transformer_shapes(self, checkpoint: Path | ModelFiles) -> dict[str, tuple[int, ...]]:
        """The transformer's weight shapes from the model's headers (what LoRAs are checked against)."""
        from ltx_core.loader import CheckpointError

        if not self.flags.check_kinds:
            return {}
        from ltx_core.loader.builder import header_weight_shapes
        from ltx_core.loader.model_files import model_files_of
        from ltx_core.model.transformer.spec import AV_TRANSFORMER

        try:
            return header_weight_shapes(AV_TRANSFORMER, model_files_of(checkpoint, headers=self.headers))
        except CheckpointError as e:
            raise FlagError(f"{self.flags.checkpoint_flag}: {e}") from None

    def _lora_file(self, flag: str, lora: LoraSpec, transformer_shapes: dict[str, tuple[int, ...]]) -> LoraSpec:
        """The LoRA file, local, checked to be a LoRA whose every key, target and shape fits the transformer
        (headers only: a LoRA fusion would fail only after the prompt encoder and the transformer are built)."""
        from ltx_core.loader import CheckpointError
        from ltx_core.loader.lora import check_lora_fits

        path = self._resolve(flag, lora.path)
        self._kind(flag, path, "lora")
        if self.flags.check_kinds and transformer_shapes:
            try:
                check_lora_fits(path, transformer_shapes, "transformer")
            except CheckpointError as e:
                raise FlagError(f"{flag}: {e}") from None
        return LoraSpec(path, lora.strength)

    def _kind(self, flag: str, path: Path, expected: ExpectedKind) -> dict[str, Any]:
        from ltx_core.loader import CheckpointError
        from ltx_pipelines.engine.checkpoint_kind import check_checkpoint_kind

        if not self.flags.check_kinds:
            return {}
        try:
            return check_checkpoint_kind(path, expected, self.headers).header.metadata
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None


def check_gemma_folder(flag: str, root: Path) -> Path:
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
