"""The names of the parts a set of model files provides, the layouts they come in, and the flag that
supplies each (no torch: command lines list and check them before any model is imported)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Component(str, Enum):
    """The parts a set of model files provides. Values are the keyword names of `ModelFiles.split`."""

    TRANSFORMER = "transformer"
    TEXT_ENCODER = "text_encoder"  # Gemma: a folder (Gemma 3) or a packed single file (Gemma 4)
    TEXT_EMBEDDINGS = "text_embeddings"  # text projection + embeddings connectors (spread over files)
    VIDEO_VAE = "video_vae"
    AUDIO_VAE = "audio_vae"  # audio VAE encoder / decoder and the vocoder
    DURATION_HEAD = "duration_head"


class Layout(str, Enum):
    SINGLE_FILE = "single-file"
    SPLIT = "split"
    DIFFUSERS = "diffusers"


# The command-line option that supplies each component (shared by every pipeline), so that errors
# raised here name what the user typed.
CHECKPOINT_FLAG = "--checkpoint-path"
GEMMA_ROOT_FLAG = "--gemma-root"
COMPONENT_FLAGS: Mapping[Component, str] = {
    Component.TRANSFORMER: "--transformer-path",
    Component.TEXT_ENCODER: "--text-encoder-path",
    Component.VIDEO_VAE: "--video-vae-path",
    Component.AUDIO_VAE: "--audio-vae-path",
    Component.DURATION_HEAD: "--duration-head-path",
}


DURATION_HEAD_PREFIX = "duration_head."

# The `config` sections each component is built from: a file given for a component must carry them.
COMPONENT_SECTIONS: Mapping[Component, tuple[str, ...]] = {
    Component.TRANSFORMER: ("transformer",),
    Component.VIDEO_VAE: ("vae",),
    Component.AUDIO_VAE: ("audio_vae", "vocoder"),
    Component.DURATION_HEAD: ("duration_head",),
}
