"""Where one component of a set of model files comes from: the `ComponentSource`
value (weight files, metadata, key translation). Every layout's reader (`model_files`, `diffusers_folder`)
fills these in; `ModelFiles` gathers one per component."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ltx_core.loader.components import Component
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.file_index import SafetensorsHeader
from ltx_core.loader.sd_ops import SDOps


@dataclass(frozen=True)
class ComponentSource:
    """Where one component's weights, config and key names come from.

    `files`: the weight files, read in order (a component may be spread over several, as the
    LTX-2.5 text embeddings are: connectors in the transformer file, projection in the text
    encoder file). `metadata`: the safetensors-style metadata the configurators read (a `config`
    object with the component's section, `model_version`, ...); None reads it from `config_file`
    (default: the first file). `key_translation`: rules run on every file key before the
    component's own rules, mapping a layout's names to the released ones (None: released names).
    """

    component: Component | None
    files: tuple[Path, ...]
    metadata: Mapping[str, Any] | None = field(default=None, compare=False)
    config_file: Path | None = None
    key_translation: SDOps | None = None
    file_translations: tuple[tuple[Path, SDOps], ...] = ()
    """Translations that replace `key_translation` for single files, for components read from files whose
    key names overlap (diffusers' LTX-2.5 `vae/` and `diffusion_decoder/` both hold `latents_mean`)."""
    config_files: tuple[Path, ...] = ()
    """The files `metadata` was translated from (a diffusers folder's `config.json`s), named in errors about
    the config; empty: the config is the metadata of `path`."""
    headers: FileHeaders | None = field(default=None, compare=False, repr=False)
    """Where the headers of `files` are read through (shared by every source of one `ModelFiles` set); None:
    a store of the source's own, so that one source reads each header once."""

    def __post_init__(self) -> None:
        if self.headers is None:
            # A cache on the value itself (set once, here): no module-level state, gone with the source.
            object.__setattr__(self, "headers", FileHeaders())
        if not self.files:
            raise ValueError(f"the {self.component} source names no file")
        stray = [str(p) for p, _ in self.file_translations if p not in self.files]
        if stray:
            raise ValueError(f"the {self.component} source translates files it does not read: {stray}")

    def reads(self, ops: SDOps) -> tuple[tuple[Path, SDOps], ...]:
        """Each file with the rules its keys go through: the component's `ops` after the file's translation."""
        own = dict(self.file_translations)
        return tuple((f, ops.after(own.get(f, self.key_translation))) for f in self.files)

    @property
    def path(self) -> Path:
        """The main file (where the metadata is read by default)."""
        return self.config_file or self.files[0]

    @property
    def config_origin(self) -> str:
        """Where the component's config comes from, for messages: the translated files, else `path`."""
        return " + ".join(repr(str(p)) for p in self.config_files) or repr(str(self.path))

    def header(self, path: Path) -> SafetensorsHeader:
        """The header of `path` (one of `files`, or any file read alongside), read once for the source's life."""
        assert self.headers is not None  # set in __post_init__
        return self.headers.header(path)

    def read_metadata(self) -> Mapping[str, Any]:
        if self.metadata is not None:
            return self.metadata
        return self.header(self.path).metadata

    def sharing(self, headers: FileHeaders) -> ComponentSource:
        """This source reading its headers through `headers` (those of the set it joins)."""
        return self if self.headers is headers else replace(self, headers=headers)
