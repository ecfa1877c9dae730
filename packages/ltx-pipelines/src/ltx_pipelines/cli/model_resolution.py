"""Model-file resolution: the files a command's model flags name (`ModelChoice`) made local and checked
(`resolve_models`): hf:// paths fetched, diffusers folders read, each file's header checked to be the kind its
flag expects (checkpoint, component, upsampler, LoRA), the model version one the pipeline runs on, LoRAs checked
to fit the transformer, the Gemma folder located. The result is the run's `RunModels`. Only headers and configs
are read here: no model is built.

`hf://` model paths: files and folders on the Hugging Face Hub, fetched through its local cache.

    hf://<org>/<repo>/<path/in/repo>          one file (checkpoints, upsamplers, LoRAs)
    hf://<org>/<repo>[/<subfolder>]           a folder (the Gemma text encoder)
    hf://<org>/<repo>@<revision>/...          a branch, tag or commit (URL-quote a '/' in it)
    hf://datasets/<org>/<repo>/...            dataset (or `spaces/`) repositories

Downloads land in the hub cache (HF_HOME / HF_HUB_CACHE, or `cache_dir`). With HF_HUB_OFFLINE
set, or `offline=True`, only the cache is used; when the Hub cannot be reached the cached copy
is used as well, and only a file absent from the cache is an error.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from ltx_core.loader.components import COMPONENT_FLAGS, Component
from ltx_core.loader.lora_spec import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec
from ltx_core.write_errors import is_disk_full
from ltx_pipelines.cli.flag_group import FlagError
from ltx_pipelines.engine.model_versions import DEFAULT_DEMO_FAMILY

if TYPE_CHECKING:
    from ltx_core.loader.file_headers import FileHeaders
    from ltx_core.loader.model_files import ModelFiles
    from ltx_pipelines.cli.model_flags import ModelChoice, ModelFlags
    from ltx_pipelines.engine.model_loading import ExpectedKind

    pass

logger = logging.getLogger(__name__)


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
    parameters: dict[str, Any] = field(default_factory=dict)
    """What the sidecar records of the model flags: the files as the run used them (the demo's substituted)."""
    # What the headers say, read out once here (every group's settle and the memory check ask for them).
    model_version: tuple[int, ...] = field(init=False)
    demo_family: str = field(init=False)
    """The demo set `--demo` substituted (the default family when none was)."""
    transformer_config: dict[str, Any] = field(init=False)
    num_layers: int | None = field(init=False)

    def __post_init__(self) -> None:
        from ltx_core.loader.checkpoint_info import declared_model_version  # here: `--help` stays light

        family = self.choice.demo_family if self.choice is not None else None
        transformer = (self.metadata.get("config") or {}).get("transformer") or {}
        layers = transformer.get("num_layers")
        derived = {
            "model_version": declared_model_version(self.metadata.get("model_version")),
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


def _components(choice: ModelChoice) -> dict[Component, str]:
    """The component files given (`--transformer-path`, ...), by component."""
    given = {
        Component.TRANSFORMER: choice.transformer,
        Component.TEXT_ENCODER: choice.text_encoder,
        Component.VIDEO_VAE: choice.video_vae,
        Component.AUDIO_VAE: choice.audio_vae,
        Component.DURATION_HEAD: choice.duration_head,
    }
    return {component: value for component, value in given.items() if value is not None}


# From which declared `model_version` on a file counts as each release. Files from 2.4 on already carry LTX-2.5's
# differences (the image CRF of 18, below), so the 2.4 pre-release files count as 2.5.
_RELEASE_SINCE: tuple[tuple[tuple[int, ...], str], ...] = (((2, 4), "2.5"), ((2, 3), "2.3"))


def released_model_version(model_version: tuple[int, ...]) -> str:
    """The release (one of `RELEASED_MODEL_VERSIONS`) a checkpoint's parsed `model_version` belongs to; none
    declared (`()`) is LTX-2."""
    for since, release in _RELEASE_SINCE:
        if model_version >= since:
            return release
    return "2"


def model_version_problem(model_version: tuple[int, ...], accepted: tuple[str, ...]) -> str | None:
    """Why a checkpoint of `model_version` is not one of the `accepted` releases, or None."""
    release = released_model_version(model_version)
    if release in accepted:
        return None
    declared = ".".join(map(str, model_version)) if model_version else "none"
    names = ", ".join(f"LTX-{v}" for v in accepted)
    return f"an LTX-{release} model (model_version {declared}); this pipeline runs on {names} files only"


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
        from ltx_core.loader.checkpoint_info import declared_model_version
        from ltx_core.loader.model_files import names_a_model_folder
        from ltx_pipelines.cli.model_resolution import is_hf_path

        split = any(c is not Component.VIDEO_VAE for c in _components(choice))
        if split:
            checkpoint, metadata = self._resolve_components(choice)
        else:
            checkpoint, metadata = self._resolve_single_file(choice)
        self._check_configs(checkpoint, single_file_flag=None if split else self.flags.checkpoint_flag)
        if self.flags.check_kinds:
            problem = model_version_problem(
                declared_model_version(metadata.get("model_version")), self.flags.model_versions
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
            parameters=self._recorded(choice),
        )

    def _recorded(self, choice: ModelChoice) -> dict[str, Any]:
        """The sidecar `parameters` entries of the model flags, by flag destination."""
        flags = self.flags
        recorded: dict[str, Any] = {flags.checkpoint_dest: choice.checkpoint}
        components = _components(choice)
        for component, flag in COMPONENT_FLAGS.items():
            recorded[flag.lstrip("-").replace("-", "_")] = components.get(component)
        recorded["demo_family"] = choice.demo_family
        if flags.loras:
            recorded["lora"] = [{"path": str(lora.path), "strength": lora.strength} for lora in choice.loras]
            recorded["lora_fusion_precision"] = choice.lora_fusion.value
        if flags.gemma:
            recorded["gemma_root"] = choice.gemma_root
        if flags.two_stage:
            recorded["spatial_upsampler_path"] = choice.spatial_upsampler
        if flags.distilled_lora:
            lora = choice.distilled_lora
            recorded["distilled_lora"] = None if lora is None else {"path": str(lora.path), "strength": lora.strength}
        return recorded

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
        from ltx_pipelines.cli.model_resolution import is_hf_path

        paths: dict[str, Path] = {}
        for component, value in _components(choice).items():
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
        from ltx_pipelines.engine.model_loading import detect_checkpoint_kind

        try:
            info = detect_checkpoint_kind(path, self.headers)
        except CheckpointError as e:
            raise FlagError(f"{flag}: {e}") from None
        if info.kind in ("lora", "upsampler", "gemma_text_encoder"):
            raise FlagError(f"{flag}: {str(path)!r} is {info.description}, not a model component file")

    def _resolve(self, flag: str, value: str | Path, *, folder: bool = False) -> Path:
        from ltx_pipelines.cli.model_resolution import HfPathError, resolve_model_path

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
        from ltx_pipelines.engine.model_loading import check_checkpoint_kind

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


HF_SCHEME = "hf://"


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


_REPO_TYPES = {"datasets": "dataset", "spaces": "space", "models": "model"}


_TRUE = {"1", "on", "yes", "true"}


# Weights in formats the loaders never read; skipping them keeps a folder download to what is used.
DEFAULT_FOLDER_IGNORE = ("*.bin", "*.pt", "*.pth", "*.gguf", "*.h5", "*.msgpack", "*.onnx", "*.ckpt", "original/*")


class HfPathError(ValueError):
    """An hf:// path that is malformed or cannot be resolved (not on the Hub and not in the cache)."""


@dataclass(frozen=True)
class HfPath:
    repo_id: str
    path_in_repo: str | None = None
    revision: str | None = None
    repo_type: str = "model"

    def __str__(self) -> str:
        prefix = {"model": ""}.get(self.repo_type, f"{self.repo_type}s/")
        rev = f"@{quote(self.revision, safe='')}" if self.revision else ""
        tail = f"/{self.path_in_repo}" if self.path_in_repo else ""
        return f"{HF_SCHEME}{prefix}{self.repo_id}{rev}{tail}"


def is_hf_path(value: str | os.PathLike[str]) -> bool:
    return isinstance(value, str) and value.startswith(HF_SCHEME)


def parse_hf_path(value: str) -> HfPath:
    """'hf://org/repo@rev/dir/file' -> HfPath('org/repo', 'dir/file', 'rev'); raises HfPathError naming the form."""
    form = "expected hf://<org>/<repo>[@<revision>][/<path in repo>]"
    if not is_hf_path(value):
        raise HfPathError(f"{value!r} is not an hf:// path; {form}")
    parts = [p for p in value[len(HF_SCHEME) :].split("/")]
    repo_type = "model"
    if parts and parts[0] in _REPO_TYPES:
        repo_type = _REPO_TYPES[parts.pop(0)]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise HfPathError(f"{value!r} names no repository; {form}")
    org, name = parts[0], parts[1]
    revision = None
    if "@" in name:
        name, revision = name.split("@", 1)
        revision = unquote(revision)
        if not revision:
            raise HfPathError(f"{value!r} has an empty revision after '@'; {form}")
    if not _NAME.match(org) or not _NAME.match(name):
        raise HfPathError(f"{value!r}: {org!r}/{name!r} is not a valid repository id; {form}")
    rest = parts[2:]
    if rest and rest[-1] == "":
        rest = rest[:-1]  # a trailing slash names a folder
    if any(p in ("", ".", "..") for p in rest):
        raise HfPathError(f"{value!r} has an empty, '.' or '..' path component; {form}")
    return HfPath(f"{org}/{name}", "/".join(rest) or None, revision, repo_type)


def hub_offline() -> bool:
    """HF_HUB_OFFLINE from the environment now (the hub library reads it once, at import)."""
    from huggingface_hub import constants as hub_constants

    env = os.environ.get("HF_HUB_OFFLINE")
    if env is not None:
        return env.strip().lower() in _TRUE
    return bool(getattr(hub_constants, "HF_HUB_OFFLINE", False))


def _hub_error(cls_name: str) -> type[BaseException]:
    """An error class of huggingface_hub by name; a never-raised placeholder where this version lacks it."""
    from huggingface_hub import errors as hub_errors

    return getattr(hub_errors, cls_name, None) or type(f"_Absent{cls_name}", (Exception,), {})


def _definitive_hub_error(error: BaseException, hf: HfPath, cache_dir: str | Path | None) -> HfPathError | None:
    """An answer the cache cannot improve on, worded with what to do; None for errors that may be the
    network's (the cache is tried then)."""
    from huggingface_hub import constants as hub_constants

    repo_url = f"https://huggingface.co/{'' if hf.repo_type == 'model' else hf.repo_type + 's/'}{hf.repo_id}"
    if isinstance(error, _hub_error("GatedRepoError")):
        return HfPathError(
            f"{hf}: {hf.repo_id} is a gated repository; accept its licence at {repo_url} (logged in), then log in "
            "here with `hf auth login` (or set HF_TOKEN)"
        )
    if isinstance(error, _hub_error("RepositoryNotFoundError")):
        return HfPathError(
            f"{hf} not found on the Hugging Face Hub: there is no repository {hf.repo_id!r} (a private one needs "
            "`hf auth login`); check the <org>/<repo> part"
        )
    if isinstance(error, _hub_error("RevisionNotFoundError")):
        return HfPathError(f"{hf} not found on the Hugging Face Hub: {hf.repo_id} has no revision {hf.revision!r}")
    if isinstance(error, _hub_error("RemoteEntryNotFoundError")):
        return HfPathError(
            f"{hf} not found on the Hugging Face Hub: {hf.repo_id} has no file {hf.path_in_repo!r}; "
            f"see the file list at {repo_url}/tree/{hf.revision or 'main'}"
        )
    if isinstance(error, _hub_error("HFValidationError")):
        return HfPathError(f"{hf} is not a valid Hugging Face path: {error}")
    if is_disk_full(error):
        cache = cache_dir or hub_constants.HF_HUB_CACHE
        return HfPathError(
            f"{hf}: no space left on the disk holding the Hugging Face cache ({cache}); free some space or point "
            "HF_HUB_CACHE (or HF_HOME) at a disk with room"
        )
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status == 401:
        return HfPathError(f"{hf}: the Hub refused the token (HTTP 401); log in again with `hf auth login`")
    return None


def _call_hub(
    fn: Any, hf: HfPath, *, offline: bool | None, cache_dir: str | Path | None, token: str | bool | None, **kwargs: Any
) -> str:
    """Call a hub download function for `hf`'s repository (its id, revision and type) online, falling back to the
    cache when the Hub cannot be reached; `kwargs`: what that function takes beside."""
    kwargs.update(repo_id=hf.repo_id, revision=hf.revision, repo_type=hf.repo_type, token=token)
    if offline is None:
        offline = hub_offline()
    if offline:
        try:
            return fn(local_files_only=True, cache_dir=cache_dir, **kwargs)
        except Exception as e:
            raise HfPathError(f"{hf} is not in the Hugging Face cache and offline mode is on ({e})") from e
    try:
        return fn(cache_dir=cache_dir, **kwargs)
    except Exception as online_error:
        definitive = _definitive_hub_error(online_error, hf, cache_dir)
        if definitive is not None:
            raise definitive from online_error
        logger.warning("could not reach the Hugging Face Hub for %s (%s); trying the local cache", hf, online_error)
        try:
            return fn(local_files_only=True, cache_dir=cache_dir, **kwargs)
        except Exception as cache_error:
            raise HfPathError(
                f"{hf}: the Hub could not be reached ({online_error}) and the file is not in the cache "
                f"({cache_error}); check the network connection (or a proxy), then try again"
            ) from online_error


def resolve_hf_file(
    path: str | HfPath,
    *,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
    token: str | bool | None = None,
) -> Path:
    """Local path of the file an hf:// path names, downloading it into the cache if needed."""
    import huggingface_hub

    hf = parse_hf_path(path) if isinstance(path, str) else path
    if not hf.path_in_repo:
        raise HfPathError(f"{str(hf)!r} names a repository, not a file; expected hf://<org>/<repo>/<file>")
    local = _call_hub(
        huggingface_hub.hf_hub_download, hf, offline=offline, cache_dir=cache_dir, token=token, filename=hf.path_in_repo
    )
    return Path(local)


def resolve_hf_folder(
    path: str | HfPath,
    *,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
    token: str | bool | None = None,
    ignore_patterns: tuple[str, ...] = DEFAULT_FOLDER_IGNORE,
) -> Path:
    """Local folder for hf://<org>/<repo>[/<subfolder>] (a snapshot in the cache, downloaded if needed)."""
    import huggingface_hub

    hf = parse_hf_path(path) if isinstance(path, str) else path
    allow = [f"{hf.path_in_repo}/*"] if hf.path_in_repo else None
    snapshot = _call_hub(
        huggingface_hub.snapshot_download,
        hf,
        offline=offline,
        cache_dir=cache_dir,
        token=token,
        allow_patterns=allow,
        ignore_patterns=list(ignore_patterns) or None,
    )
    folder = Path(snapshot) / hf.path_in_repo if hf.path_in_repo else Path(snapshot)
    if not folder.is_dir():
        raise HfPathError(f"{str(hf)!r}: {hf.path_in_repo!r} is not a folder of {hf.repo_id}")
    return folder


def resolve_model_path(
    value: str | os.PathLike[str],
    *,
    folder: bool = False,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
) -> Path:
    """A local path as given (user-expanded, absolute), or the cached copy of an hf:// file or folder."""
    if is_hf_path(value):
        resolve = resolve_hf_folder if folder else resolve_hf_file
        return resolve(str(value), cache_dir=cache_dir, offline=offline)
    return Path(value).expanduser().absolute()


def cached_hf_file(path: str | HfPath, *, cache_dir: str | Path | None = None) -> Path | None:
    """The cached copy of an hf:// file without any network access, or None when it is not cached."""
    import huggingface_hub

    hf = parse_hf_path(path) if isinstance(path, str) else path
    if not hf.path_in_repo:
        return None
    found = huggingface_hub.try_to_load_from_cache(
        hf.repo_id, hf.path_in_repo, cache_dir=cache_dir, revision=hf.revision, repo_type=hf.repo_type
    )
    return Path(found) if isinstance(found, str) else None
