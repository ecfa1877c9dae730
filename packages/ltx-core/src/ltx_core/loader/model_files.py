"""The one value for a set of model files: which component comes from which file(s), with which
config and key translation.

Users bring weights in several shapes: the reference's single file (LTX-2 / 2.3: every component
under its own prefix in one `.safetensors`, plus a Gemma 3 folder), or one file per component
(LTX-2.5: transformer, packed text encoder, video VAE, audio VAE, duration head). Each shape is
read into a `ModelFiles` value by one constructor, and models are built from that value only
(`build_model(spec, files)` or `build_model(spec, files.source(...))`); nothing downstream looks at
file names. A new layout (for instance a diffusers folder: per-component `config.json` +
`diffusion_pytorch_model.safetensors` with diffusers' key names) is one more constructor that fills
in `ComponentSource`s: the weight files, the metadata the configurators read (`{"config": {...}}`
as the released files store it) and a key translation to the released names (`SDOps`, applied
before each component's own rules).

Latent upsamplers are separate files in every layout and stay plain paths.

`diffusers_folder` (which builds on `component_source`, never on this module) is imported where a folder
is read rather than at the top, so that its translation tables load only for a diffusers folder.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_core.loader.component_source import ComponentSource
from ltx_core.loader.components import (
    CHECKPOINT_FLAG,
    COMPONENT_FLAGS,
    COMPONENT_SECTIONS,
    DURATION_HEAD_PREFIX,
    GEMMA_ROOT_FLAG,
    Component,
    Layout,
)
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.gguf_file import is_gguf
from ltx_core.loader.safetensors_header import check_checkpoint_path, read_safetensors_header
from ltx_core.model_version import parse_model_version

if TYPE_CHECKING:
    from ltx_core.loader.checkpoint_info import CheckpointInfo

logger = logging.getLogger(__name__)


def component_flag(component: Component, layout: Layout) -> str:
    if layout is Layout.DIFFUSERS:
        from ltx_core.loader.diffusers_folder import READ_COMPONENT_FOLDERS

        folders = READ_COMPONENT_FOLDERS.get(component)
        if folders is None:
            return GEMMA_ROOT_FLAG if component is Component.TEXT_ENCODER else "a component diffusers does not carry"
        return " + ".join(f"{f}/" for f in folders) + " in the diffusers folder"
    if layout is Layout.SINGLE_FILE:
        return GEMMA_ROOT_FLAG if component is Component.TEXT_ENCODER else CHECKPOINT_FLAG
    if component is Component.TEXT_EMBEDDINGS:
        return f"{COMPONENT_FLAGS[Component.TRANSFORMER]} and {COMPONENT_FLAGS[Component.TEXT_ENCODER]}"
    return COMPONENT_FLAGS[component]


def _has_transformer_config(path: Path, headers: FileHeaders) -> bool:
    config = headers.metadata(path).get("config")
    return isinstance(config, dict) and isinstance(config.get("transformer"), dict)


def _gguf_config_companion(paths: Mapping[Component, Path], headers: FileHeaders) -> Path | None:
    """The file a GGUF transformer without a config of its own takes its config from: the first other
    given file whose config has a `transformer` section (the single file, or a VAE file, that the
    user already has); None when the transformer file carries its config (or is no GGUF)."""
    transformer = paths[Component.TRANSFORMER]
    if not is_gguf(transformer) or _has_transformer_config(transformer, headers):
        return None
    for component, path in paths.items():
        if component is not Component.TRANSFORMER and path.is_file() and _has_transformer_config(path, headers):
            return path
    others = ", ".join(f for c, f in COMPONENT_FLAGS.items() if c is not Component.TRANSFORMER)
    raise CheckpointError(
        f"{COMPONENT_FLAGS[Component.TRANSFORMER]}: the GGUF file {str(transformer)!r} carries no LTX config "
        f"(no 'config' field with a 'transformer' section); give a file that has one with {others} "
        "(the single-file checkpoint or a component file), or convert with `python -m ltx_core.convert to-gguf`"
    )


def _file(path: str | Path, component: Component, layout: Layout) -> Path:
    try:
        return check_checkpoint_path(path)
    except CheckpointError as e:
        raise CheckpointError(f"{component_flag(component, layout)}: {e}") from None


def _existing(path: str | Path, component: Component, layout: Layout) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"{component_flag(component, layout)}: not found: {str(p)!r}")
    return p


@dataclass(frozen=True)
class ModelFiles:
    """A set of model files: one `ComponentSource` per component it provides."""

    layout: Layout
    sources: tuple[ComponentSource, ...]
    headers: FileHeaders = field(default_factory=FileHeaders, compare=False, repr=False)
    """The headers every source of the set reads through: each file's header is read once for the set's life
    (a run's model version, configs, decoder kind and weight index all come from it)."""
    given: Path | None = field(default=None, compare=False)
    """The one path the set was read from when a caller named it so (a single file, a model folder): what run
    records name as the checkpoint, as they did before the path was resolved into a set. None: the set itself."""

    def __post_init__(self) -> None:
        # Every source reads through the set's store (sources built apart, or taken from another set, join it).
        object.__setattr__(self, "sources", tuple(s.sharing(self.headers) for s in self.sources))
        named = [s.component for s in self.sources]
        if None in named:
            raise ValueError("every source of a set of model files names its component")
        doubled = sorted({c.value for c in named if named.count(c) > 1})
        if doubled:
            raise ValueError(f"a set of model files gives these components twice: {doubled}")

    def as_dict(self) -> dict[str, Any]:
        """Layout and each component's files, as plain JSON values (for run records)."""
        return {
            "layout": self.layout.value,
            "components": {str(s.component.value): [str(f) for f in s.files] for s in self.sources if s.component},
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any], *, only: Collection[Component] | None = None) -> ModelFiles:
        """The set `as_dict` described (a run record read back): split sets and single files (with a
        replaced video VAE or a Gemma folder); a diffusers folder is recorded by its path instead.
        `only`: just these components (each from its recorded file, which alone must still exist), e.g.
        the decoders of a run whose transformer has since moved."""
        try:
            layout = Layout(record["layout"])
            components = {str(c): [str(f) for f in fs] for c, fs in record["components"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"not a recorded set of model files ({e!r}): {record!r}") from None
        first = {c: fs[0] for c, fs in components.items() if fs}
        if only is not None and layout in (Layout.SPLIT, Layout.SINGLE_FILE):
            checkpoint = first.get(Component.TRANSFORMER.value)
            sources = []
            for component in only:
                path = first.get(component.value)
                if path is None:
                    continue
                # A single file's own components are named by its flag; a replaced video VAE by its own.
                named = layout if path == checkpoint else Layout.SPLIT
                sources.append(ComponentSource(component, (_file(path, component, named),)))
            return cls(layout, tuple(sources))
        if layout is Layout.SPLIT:
            return cls.split(**{c.value: first[c.value] for c in COMPONENT_FLAGS if c.value in first})
        if layout is Layout.SINGLE_FILE and Component.TRANSFORMER.value in first:
            checkpoint = first[Component.TRANSFORMER.value]
            video_vae = first.get(Component.VIDEO_VAE.value)
            return cls.single_file(
                checkpoint,
                gemma_root=first.get(Component.TEXT_ENCODER.value),
                video_vae=video_vae if video_vae != checkpoint else None,
            )
        raise CheckpointError(f"a {layout.value} set of model files is not rebuilt from a record; give its path")

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def single_file(
        cls,
        checkpoint: str | Path,
        *,
        gemma_root: str | Path | None = None,
        video_vae: str | Path | None = None,
        headers: FileHeaders | None = None,
    ) -> ModelFiles:
        """The released single file (LTX-2 / LTX-2.3): every component is read from `checkpoint`
        under its own key prefix, exactly as before (the duration head too, when the file has one);
        the text encoder is a Gemma folder (or none when prompts are not encoded). `video_vae`
        replaces the checkpoint's video VAE."""
        layout = Layout.SINGLE_FILE
        from ltx_core.loader.diffusers_folder import is_diffusers_folder

        headers = FileHeaders() if headers is None else headers  # a store given: the run's (headers read once)

        hub_folder = str(checkpoint).startswith(_HF_SCHEME) and names_a_model_folder(checkpoint)
        if is_diffusers_folder(checkpoint) or hub_folder:
            # A diffusers model folder given where the single file is expected (same flag).
            if video_vae is not None:
                raise CheckpointError(
                    f"{COMPONENT_FLAGS[Component.VIDEO_VAE]} cannot replace the video VAE of a diffusers folder"
                )
            return cls.from_diffusers(checkpoint, gemma_root=gemma_root)
        ckpt = _file(checkpoint, Component.TRANSFORMER, layout)
        sources = [
            ComponentSource(Component.TRANSFORMER, (ckpt,)),
            ComponentSource(Component.TEXT_EMBEDDINGS, (ckpt,)),
            ComponentSource(
                Component.VIDEO_VAE, (_file(video_vae, Component.VIDEO_VAE, Layout.SPLIT) if video_vae else ckpt,)
            ),
            ComponentSource(Component.AUDIO_VAE, (ckpt,)),
        ]
        # A single file may also carry the LTX-2.5 duration head (`duration_head.*`).
        if any(k.startswith(DURATION_HEAD_PREFIX) for k in headers.header(ckpt).tensors):
            sources.append(ComponentSource(Component.DURATION_HEAD, (ckpt,)))
        if gemma_root is not None:
            gemma = _existing(gemma_root, Component.TEXT_ENCODER, layout)
            sources.append(ComponentSource(Component.TEXT_ENCODER, (gemma,)))
        files = cls(layout, tuple(sources), headers=headers)
        files.check_text_encoder_match()
        return files

    @classmethod
    def split(
        cls,
        *,
        transformer: str | Path | None = None,
        text_encoder: str | Path | None = None,
        video_vae: str | Path | None = None,
        audio_vae: str | Path | None = None,
        duration_head: str | Path | None = None,
        headers: FileHeaders | None = None,
    ) -> ModelFiles:
        """One file per component (the LTX-2.5 release). Omitted components are absent; a pipeline
        states what it needs with `require`. The text embeddings take their config and connectors
        from the transformer file and the text projection from the text encoder file (when that is
        a packed file; a Gemma folder carries no projection)."""
        layout = Layout.SPLIT
        given = {
            Component.TRANSFORMER: transformer,
            Component.TEXT_ENCODER: text_encoder,
            Component.VIDEO_VAE: video_vae,
            Component.AUDIO_VAE: audio_vae,
            Component.DURATION_HEAD: duration_head,
        }
        if all(v is None for v in given.values()):
            flags = ", ".join(COMPONENT_FLAGS.values())
            raise CheckpointError(f"a split set of model files needs at least one of {flags}")
        sources: list[ComponentSource] = []
        paths: dict[Component, Path] = {}
        headers = FileHeaders() if headers is None else headers
        for component, value in given.items():
            if value is None:
                continue
            if component is Component.TEXT_ENCODER:
                paths[component] = _existing(value, component, layout)
            else:
                paths[component] = _file(value, component, layout)
            sources.append(ComponentSource(component, (paths[component],)))
        if Component.TRANSFORMER in paths:
            companion = _gguf_config_companion(paths, headers)
            if companion is not None:
                sources = [
                    ComponentSource(Component.TRANSFORMER, (paths[Component.TRANSFORMER],), config_file=companion)
                    if s.component is Component.TRANSFORMER
                    else s
                    for s in sources
                ]
            te = paths.get(Component.TEXT_ENCODER)
            extra = (te,) if te is not None and te.is_file() else ()
            sources.append(
                ComponentSource(
                    Component.TEXT_EMBEDDINGS, (paths[Component.TRANSFORMER], *extra), config_file=companion
                )
            )
        files = cls(layout, tuple(sources), headers=headers)
        files.check_text_encoder_match()
        return files

    @classmethod
    def from_diffusers(cls, folder: str | Path, *, gemma_root: str | Path | None = None) -> ModelFiles:
        """A diffusers model folder (local, or `hf://<org>/<repo>`): each component it carries, with
        the config translated from its `config.json` and diffusers' key names mapped to the released
        ones (`ltx_core.loader.diffusers_folder`). The text encoder stays a Gemma folder
        (`gemma_root`). A folder of another model family is refused here, before any loading."""
        from ltx_core.loader.diffusers_folder import READ_COMPONENT_FOLDERS, read_diffusers_folder

        found = read_diffusers_folder(folder)
        sources = [found.source(c) for c in READ_COMPONENT_FOLDERS if found.has(c)]
        if not sources:
            raise CheckpointError(
                f"the diffusers folder {str(found.root)!r} has none of the component folders "
                f"{sorted({f for fs in READ_COMPONENT_FOLDERS.values() for f in fs})}"
            )
        if gemma_root is not None:
            gemma = _existing(gemma_root, Component.TEXT_ENCODER, Layout.SINGLE_FILE)
            sources.append(ComponentSource(Component.TEXT_ENCODER, (gemma,)))
        return cls(Layout.DIFFUSERS, tuple(sources))

    @classmethod
    def from_paths(
        cls,
        *,
        checkpoint: str | Path | None = None,
        gemma_root: str | Path | None = None,
        transformer: str | Path | None = None,
        text_encoder: str | Path | None = None,
        video_vae: str | Path | None = None,
        audio_vae: str | Path | None = None,
        duration_head: str | Path | None = None,
    ) -> ModelFiles:
        """Either a single file (+ Gemma folder) or a split set, from whichever paths were given.
        A mix of the two is refused, naming the options on both sides; `video_vae` fits both
        (it replaces the single file's video VAE)."""
        split_given = {
            Component.TRANSFORMER: transformer,
            Component.TEXT_ENCODER: text_encoder,
            Component.AUDIO_VAE: audio_vae,
            Component.DURATION_HEAD: duration_head,
        }
        split_flags = [COMPONENT_FLAGS[c] for c, v in split_given.items() if v is not None]
        single_flags = [f for f, v in ((CHECKPOINT_FLAG, checkpoint), (GEMMA_ROOT_FLAG, gemma_root)) if v is not None]
        if split_flags and single_flags:
            raise CheckpointError(
                f"{' and '.join(single_flags)} (single-file checkpoint) cannot be combined with "
                f"{', '.join(split_flags)} (one file per component): give either the single file "
                f"(+ {GEMMA_ROOT_FLAG}) or the component files; {COMPONENT_FLAGS[Component.VIDEO_VAE]} fits both"
            )
        if checkpoint is not None:
            return cls.single_file(checkpoint, gemma_root=gemma_root, video_vae=video_vae)
        if gemma_root is not None:
            raise CheckpointError(
                f"{GEMMA_ROOT_FLAG} was given without {CHECKPOINT_FLAG}; with component files give the text "
                f"encoder as {COMPONENT_FLAGS[Component.TEXT_ENCODER]}"
            )
        if not split_flags and video_vae is None:
            raise CheckpointError(
                f"no model files given: pass {CHECKPOINT_FLAG} (single file) or the component files "
                f"({', '.join(COMPONENT_FLAGS.values())})"
            )
        return cls.split(
            transformer=transformer,
            text_encoder=text_encoder,
            video_vae=video_vae,
            audio_vae=audio_vae,
            duration_head=duration_head,
        )

    def subset(self, *components: Component) -> ModelFiles:
        """The set reduced to `components` (those it provides), e.g. the decoders alone."""
        kept = tuple(s for s in self.sources if s.component in components)
        return ModelFiles(self.layout, kept, headers=self.headers)

    def replacing(self, files: Mapping[Component, str | Path]) -> ModelFiles:
        """The set with each component of `files` read from that file instead (one file per component,
        released key names, as `--video-vae-path` replaces a single file's video VAE)."""
        replaced = tuple(
            ComponentSource(c, (_file(path, c, Layout.SPLIT),)) for c, path in files.items() if path is not None
        )
        kept = tuple(s for s in self.sources if s.component not in files)
        layout = self.layout if not replaced else Layout.SPLIT if not kept else self.layout
        return ModelFiles(layout, kept + replaced, headers=self.headers)

    # -- access -------------------------------------------------------------------------------
    def has(self, component: Component | str) -> bool:
        component = Component(component)
        return any(s.component is component for s in self.sources)

    def source(self, component: Component | str) -> ComponentSource:
        """The source of `component`; a clear error naming the option when the set lacks it."""
        component = Component(component)
        for s in self.sources:
            if s.component is component:
                return s
        raise CheckpointError(self._missing_message([component]))

    def require(self, *components: Component | str, purpose: str = "this pipeline") -> None:
        """Refuse, before any loading, a set that lacks components `purpose` needs (all named at once)."""
        missing = [Component(c) for c in components if not self.has(c)]
        if missing:
            raise CheckpointError(self._missing_message(missing, purpose))

    def check_components(self, *needed: Component | str, purpose: str = "this pipeline") -> None:
        """Refuse, from configs and headers alone, a set that lacks a component `purpose` needs or whose
        file for a component lacks the config sections that component is built from (an audio VAE file
        given as the video VAE, a transformer file as the duration head, a folder without `vocoder/`)."""
        self.require(*needed, purpose=purpose)
        for source in self.sources:
            sections = COMPONENT_SECTIONS.get(source.component) if source.component is not None else None
            if not sections:
                continue
            config = source.read_metadata().get("config")
            sections_found = config.items() if isinstance(config, Mapping) else ()
            present = sorted(k for k, v in sections_found if isinstance(v, Mapping))
            lacking = [section for section in sections if section not in present]
            if lacking:
                assert source.component is not None
                raise CheckpointError(
                    f"{self._flag_of(source)}: {str(source.path)!r} cannot provide the {source.component.value}: its "
                    f"config has no {' or '.join(map(repr, lacking))} section (sections present: {present})"
                )

    def _flag_of(self, source: ComponentSource) -> str:
        """The option (or folder) that supplied `source`: a single file's replaced video VAE is its own flag."""
        assert source.component is not None
        replaced_vae = self.layout is Layout.SINGLE_FILE and source.component is Component.VIDEO_VAE
        if replaced_vae and self.has(Component.TRANSFORMER) and source.path != self.main_path:
            return COMPONENT_FLAGS[Component.VIDEO_VAE]
        return component_flag(source.component, self.layout)

    def _missing_message(self, missing: list[Component], purpose: str = "this run") -> str:
        names = ", ".join(f"{c.value} ({component_flag(c, self.layout)})" for c in missing)
        have = ", ".join(str(s.component.value) for s in self.sources if s.component) or "nothing"
        return (
            f"{purpose} needs {names}, which the {self.layout.value} model files {str(self.location)!r} do not "
            f"provide (they provide: {have})"
        )

    def __str__(self) -> str:
        # Messages format the model files a pipeline holds as the place the user named, not the set's repr.
        return str(self.location)

    @property
    def main_path(self) -> Path:
        """The file that describes the model (the transformer's, else the first file given)."""
        if self.has(Component.TRANSFORMER):
            return self.source(Component.TRANSFORMER).path
        return self.sources[0].path

    @property
    def location(self) -> Path:
        """Where the set is, for messages: a diffusers folder's root, else the main file."""
        if self.layout is Layout.DIFFUSERS:
            return self.main_path.parent.parent  # <root>/<component>/<weights file>
        return self.main_path

    def config(self) -> dict[str, Any]:
        """The reference's `config` metadata of the whole set: each component's sections, the first
        source that has a section giving it (the transformer's first). {} when no source has one."""
        merged: dict[str, Any] = {}
        ordered = sorted(self.sources, key=lambda s: s.component is not Component.TRANSFORMER)
        read: set[Path] = set()
        for source in ordered:
            if source.component is Component.TEXT_ENCODER:
                continue  # a Gemma folder or packed file: its own config, no section of the reference's
            if source.metadata is None:  # read from the file: each file's header once
                if source.path in read:
                    continue
                read.add(source.path)
            config = source.read_metadata().get("config")
            if isinstance(config, Mapping):
                for section, value in config.items():
                    merged.setdefault(section, value)
        return merged

    @functools.cached_property
    def info(self) -> CheckpointInfo:
        """The set's header-only facts (model version, duration head, keyframe embedding, decoder kind, configs),
        worked out on first use and kept with the set (a frozen value: its files do not change under it)."""
        from ltx_core.loader.checkpoint_info import CheckpointInfo

        return CheckpointInfo.of(self)

    def model_version(self) -> tuple[int, ...]:
        """The transformer's `model_version` metadata parsed ('2.5.1' -> (2, 5, 1)); () when absent."""
        if not self.has(Component.TRANSFORMER):
            return ()
        return parse_model_version(self.source(Component.TRANSFORMER).read_metadata().get("model_version"))

    # -- consistency --------------------------------------------------------------------------
    def check_text_encoder_match(self) -> None:
        """Refuse a text encoder other than the one the transformer was trained with, before loading:
        the transformer's `gemma_source_checkpoint.gemma_version` against the encoder's own version
        (a packed file's `gemma_config.gemma_version`, a folder's `config.json`)."""
        if not (self.has(Component.TRANSFORMER) and self.has(Component.TEXT_ENCODER)):
            return
        transformer = self.source(Component.TRANSFORMER)
        check_text_encoder_version(
            transformer.read_metadata(),
            self.source(Component.TEXT_ENCODER).path,
            transformer_name=str(transformer.path),
            flag=component_flag(Component.TEXT_ENCODER, self.layout),
            headers=self.headers,
        )


ModelSource = str | Path | ModelFiles
"""What the pipelines and loaders take as "the checkpoint": the single file, a diffusers model folder
(local, or `hf://<org>/<repo>`), or a set of model files already described."""

_HF_SCHEME = "hf://"


def names_a_model_folder(source: str | Path) -> bool:
    """Whether a path names a model folder (a local directory, or a Hub repository that is not one
    `.safetensors` file) rather than one weights file."""
    text = str(source)
    if text.startswith(_HF_SCHEME):
        return not text.endswith(".safetensors")
    return Path(text).expanduser().is_dir()


def model_files_of(
    source: ModelSource, *, gemma_root: str | Path | None = None, headers: FileHeaders | None = None
) -> ModelFiles:
    """The one resolution of a checkpoint value into a set of model files: a `ModelFiles` as it is, a
    model folder through `ModelFiles.from_diffusers` (another model family's folder is refused there,
    before loading), a file through `ModelFiles.single_file`. `gemma_root` joins a path's set (a
    `ModelFiles` value already states its text encoder). `headers`: the store a single file's set reads
    through (the one a command line's checks already filled, so no header is read twice in a run)."""
    if isinstance(source, ModelFiles):
        return source
    if names_a_model_folder(source):
        files = ModelFiles.from_diffusers(source, gemma_root=gemma_root)
    else:
        files = ModelFiles.single_file(source, gemma_root=gemma_root, headers=headers)
    return replace(files, given=Path(source))


def check_text_encoder_version(
    transformer_metadata: Mapping[str, Any],
    encoder: str | Path,
    *,
    transformer_name: str,
    flag: str = "",
    headers: FileHeaders | None = None,
) -> None:
    """Refuse, before loading, a text encoder whose stated version is not the transformer's
    `gemma_source_checkpoint.gemma_version` (transformers that state none accept any encoder)."""
    wanted = _transformer_gemma_version(transformer_metadata)
    if wanted is None:
        return
    found = text_encoder_version(Path(encoder), headers)
    if found != wanted:
        hint = f"; give the matching {flag}" if flag else ""
        raise CheckpointError(
            f"the text encoder {str(encoder)!r} is {found or 'of no stated version'}, but the transformer "
            f"{transformer_name!r} was trained with {wanted} (its metadata gemma_source_checkpoint.gemma_version){hint}"
        )


def _transformer_gemma_version(metadata: Mapping[str, Any]) -> str | None:
    source = metadata.get("gemma_source_checkpoint")
    if isinstance(source, Mapping) and isinstance(source.get("gemma_version"), str):
        return source["gemma_version"]
    return None


def text_encoder_version(path: Path, headers: FileHeaders | None = None) -> str | None:
    """The Gemma version a text encoder states: a packed file's `gemma_config.gemma_version`, else its
    `model_type`; for a folder, the `gemma_version` / `model_type` of its `config.json`."""
    import json

    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            return None
        try:
            config = json.loads(config_path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
    else:
        header = headers.header(path) if headers is not None else read_safetensors_header(path)
        config = header.metadata.get("gemma_config")
    if not isinstance(config, Mapping):
        return None
    version = config.get("gemma_version") or config.get("model_type")
    return str(version) if version is not None else None


def read_checkpoint_config(path: Any, section: str | None = None, *, expected_kind: str = "") -> dict[str, Any]:
    """The `config` metadata of a checkpoint, or one section of it.

    `path`: a checkpoint file, a model folder (a diffusers folder: its configs translated to the
    reference's sections) or a `ModelFiles` set (each section from the component that has it).
    `expected_kind` describes the file the caller needs (e.g. "an LTX-2 single-file checkpoint")
    so that a wrong file produces an error that says what was expected.
    """
    kind = f" (expected {expected_kind})" if expected_kind else ""
    if isinstance(path, ModelFiles) or names_a_model_folder(path):
        files = model_files_of(path)
        config: Any = files.config()
        where = str(files.location)
        if not config:
            raise CheckpointError(f"the model files {where!r} state no 'config' in their metadata{kind}")
    else:
        header = read_safetensors_header(path)
        where = str(header.path)
        config = header.metadata.get("config")
        if not isinstance(config, dict):
            raise CheckpointError(f"{where!r} has no 'config' entry in its safetensors metadata{kind}")
    if section is None:
        return config
    if not isinstance(config.get(section), dict):
        present = sorted(k for k, v in config.items() if isinstance(v, dict))
        raise CheckpointError(f"{where!r}: its config has no {section!r} section{kind}; sections present: {present}")
    return config[section]
