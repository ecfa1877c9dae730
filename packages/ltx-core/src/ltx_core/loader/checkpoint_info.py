"""What a run needs to know about its model files before it builds a model, worked out once per set.

A pipeline asks the same header-only questions many times over a run: which model version the files declare
(its defaults follow from it), whether a duration head is there, whether the transformer has the keyframe
embedding, which video decoder the VAE calls for, and the config sections the models are built from.
`CheckpointInfo` holds the answers; `ModelFiles.info` computes it on first use and keeps it for the set's life
(the headers it reads come from the set's `FileHeaders`, so nothing here reads a file twice either).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ltx_core.loader.components import Component
from ltx_core.loader.errors import CheckpointError
from ltx_core.model_version import parse_model_version

if TYPE_CHECKING:
    from ltx_core.loader.model_files import ModelFiles

KEYFRAME_EMBEDDING_FLAG = "use_keyframes_abs_pos_embedding"
"""The transformer config field of the keyframe absolute-position embedding that marks generated keyframe slots."""


class VideoDecoderKind(enum.Enum):
    """Which video decoder a set's video VAE config calls for."""

    CONV = "conv"
    """The convolutional decoder (LTX-2 / 2.3, and the LTX-2.5 conv VAE file)."""
    DIFFUSION = "diffusion"
    """The LTX-2.5 diffusion decoder (`CausalDiffusionVAE`)."""


def declared_model_version(version: object) -> tuple[int, ...]:
    """A `model_version` metadata value as a comparable tuple: '2.4-rc2' counts as 2.4; unset or unparsable: ()."""
    if version is None:
        return ()
    return parse_model_version(str(version).replace("-", "."))


@dataclass(frozen=True)
class CheckpointInfo:
    """The header-only facts of one set of model files (see the module docstring)."""

    model_version: tuple[int, ...]
    """The transformer's declared `model_version` ('2.3.0' -> (2, 3, 0), '2.4-rc1' -> (2, 4)); () when it
    declares none, has no transformer, or its metadata cannot be read. Pipeline defaults are picked by it."""
    declared_version: str | None
    """The `model_version` metadata as the file states it (None: not stated)."""
    has_duration_head: bool
    """Whether the set carries an LTX-2.5 duration head (its own file, or `duration_head.*` in a single file)."""
    keyframe_embedding_problem: str | None
    """Why the transformer cannot generate keyframe slots (no keyframe embedding in its config), or None."""
    video_decoder: VideoDecoderKind | None
    """The decoder the video VAE's config calls for; None when the set has no video VAE."""
    configs: Mapping[str, Any] = field(repr=False)
    """The reference's `config` sections of the whole set (`ModelFiles.config`): transformer, vae, audio_vae, ..."""
    metadata: Mapping[str, Any] = field(repr=False)
    """The transformer file's whole metadata ({} without a transformer)."""

    def section(self, name: str) -> Mapping[str, Any]:
        """One config section ({} when the set has none of that name)."""
        value = self.configs.get(name)
        return value if isinstance(value, Mapping) else {}

    @classmethod
    def of(cls, files: ModelFiles) -> CheckpointInfo:
        """The facts of `files`, from their configs and headers alone (no weight is read)."""
        metadata: Mapping[str, Any] = {}
        if files.has(Component.TRANSFORMER):
            metadata = files.source(Component.TRANSFORMER).read_metadata()
        version = metadata.get("model_version")
        try:
            configs = files.config()
        except CheckpointError:
            configs = {}
        return cls(
            model_version=declared_model_version(version),
            declared_version=None if version is None else str(version),
            has_duration_head=files.has(Component.DURATION_HEAD),
            keyframe_embedding_problem=_keyframe_embedding_problem(configs),
            video_decoder=_video_decoder_kind(files),
            configs=configs,
            metadata=metadata,
        )


def _keyframe_embedding_problem(configs: Mapping[str, Any]) -> str | None:
    transformer = configs.get("transformer")
    if not isinstance(transformer, Mapping):
        present = sorted(k for k, v in configs.items() if isinstance(v, Mapping))
        return f"its transformer config cannot be read (no 'transformer' config section; sections present: {present})"
    if not transformer.get(KEYFRAME_EMBEDDING_FLAG, False):
        return (
            f"its transformer config lacks {KEYFRAME_EMBEDDING_FLAG} (the keyframe embedding that marks "
            "generated keyframe slots; LTX-2.5 transformers have it)"
        )
    return None


def _video_decoder_kind(files: ModelFiles) -> VideoDecoderKind | None:
    # The video VAE's own file decides (a single file given another video VAE keeps its transformer's sections
    # in `config()`, but decodes with the replacement).
    if not files.has(Component.VIDEO_VAE):
        return None
    from ltx_core.model.video_vae.diffusion_config import is_diffusion_vae_config

    config = files.source(Component.VIDEO_VAE).read_metadata().get("config") or {}
    return VideoDecoderKind.DIFFUSION if is_diffusion_vae_config(config) else VideoDecoderKind.CONV
